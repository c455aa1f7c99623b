"""Stopping for a human's approval after a phase: an item whose execute ticked
`approve-design` waits there after design.md, `phase next` is refused until someone
authorized decides, `the-loop changes` sends its words and the pointer back to `design`, and
`the-loop approve` lets the walk go on. The real `the-loop phase` CLI over real HTTP, the
real App and database, the fake GitHub. (An item without the row walks from design straight
on: test_phases.)"""

from __future__ import annotations

from typing import Any

import pytest

from app.gate.markers import MarkerKind
from app.store.tables import JobKind
from tests.gate_support import (
    REPO,
    comment,
    deliver,
    item_row,
    jobs,
    marked,
    progress_of,
)
from tests.phase_support import phase, write
from tests.support import wait_for

pytestmark = pytest.mark.admin_token

EXECUTE_REPLY = (
    "the-loop execute\n- [ ] requirements-definition\n- [x] design\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n- [x] approve-design\n"
)


def test_an_item_with_approve_design_waits_after_the_design(
    phased_app: Any, phase_env: dict[str, str], fake_github: Any
) -> None:
    fake, _ = fake_github
    (spawn,) = jobs(phased_app, JobKind.SPAWN)
    assert "At `approve-design` a human reads the phase's artifact" in spawn.payload["prompt"]
    write(phase_env, "design.md")
    moved = phase(phase_env, "next")
    assert moved.returncode == 0, moved.stderr
    assert "Moved from design to approve-design." in moved.stdout
    assert "end your turn now and wait" in moved.stdout
    (notice,) = marked(fake, MarkerKind.REVIEW)
    body = notice["body"]
    assert "### the-loop: `design` waits for approval" in body
    assert "- **Read:** [`docs/specs/issue-1/design.md`](" in body
    assert "/blob/the-loop/issue-1/docs/specs/issue-1/design.md" in body
    assert "Reply `the-loop approve` to let it go on to `implementation`" in body
    wait_for(lambda: "| ⏳ | `approve-design` | waiting on a human: reply" in progress_of(fake))

    refused = phase(phase_env, "next")
    assert refused.returncode == 1
    assert "approve-design waits for a human decision" in refused.stderr
    assert item_row(phased_app).phase == "approve-design"

    fake.grant(REPO, "mallory", "read")
    deliver(
        phased_app, "issue_comment", comment("the-loop approve", login="mallory", cid=6002), "m"
    )
    (refusal,) = marked(fake, MarkerKind.REFUSAL)
    assert "did not approve `approve-design`" in refusal["body"]
    assert item_row(phased_app).phase == "approve-design"

    deliver(phased_app, "issue_comment", comment("the-loop changes use sqlite", cid=6003), "c")
    row = item_row(phased_app)
    assert row.phase == "design" and "approve-design" not in (row.gates or {})
    (delivery,) = jobs(phased_app, JobKind.DELIVER)
    assert delivery.payload["body"].startswith("use sqlite")
    assert "requested changes at `approve-design`" in delivery.payload["body"]
    assert "back at `design`" in delivery.payload["body"]

    again = phase(phase_env, "next")
    assert again.returncode == 0 and "Moved from design to approve-design." in again.stdout
    assert len(marked(fake, MarkerKind.REVIEW)) == 2  # a new round, a new notice

    deliver(phased_app, "issue_comment", comment("the-loop approve", cid=6004), "approve")
    row = item_row(phased_app)
    assert row.gates["approve-design"]["by"] == "Codertocat"
    told = [j.payload["body"] for j in jobs(phased_app, JobKind.DELIVER)]
    assert "Run `the-loop phase next` to go on to `implementation`" in told[-1]
    on = phase(phase_env, "next")
    assert on.returncode == 0 and "Moved from approve-design to implementation." in on.stdout
    events = phased_app.events("gate.approved")
    assert [e.get("gate") for e in events] == ["approve-design"]
