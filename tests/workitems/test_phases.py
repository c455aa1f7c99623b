"""Walking a work item through its phases: `the-loop phase next` (the real CLI, over real HTTP
with a session token), the App's record, the review gate on GitHub, completion, and the one
progress comment that tells the truth at each step. Fake GitHub, real App and database; the
item and its session's environment from tests/phase_support.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from app.gate.markers import MarkerKind
from app.store.tables import Job, JobKind, WorkItemStatus
from app.workstate import read_state, state_path
from tests.gate_support import (
    ITEM,
    REPO,
    comment,
    deliver,
    item_row,
    jobs,
    marked,
    progress_of,
)
from tests.phase_support import phase, spawner_sees, write
from tests.support import artifact, wait_for

pytestmark = pytest.mark.admin_token  # the operator may read /status

SPEC = "issue-1"


def test_execute_puts_the_pointer_on_the_first_phase_in_force(phased_app, fake_github):
    row = item_row(phased_app)
    assert row.phase == "design" and row.state == WorkItemStatus.FROZEN
    (spawn,) = jobs(phased_app, JobKind.SPAWN)
    assert spawn.payload["phase"] == "design"
    prompt = spawn.payload["prompt"]
    assert "the-loop phase next" in prompt and "docs/specs/issue-1/design.md" in prompt
    wait_for(lambda: marked(fake_github[0], MarkerKind.PROGRESS))
    text = progress_of(fake_github[0])
    assert "| ▶️ | `design` | current |" in text
    assert "| ⏭️ | `requirements-definition` | skipped |" in text
    assert "**Session:** queued (1 of 1) for a spawner" in text


def test_phase_next_is_refused_while_the_artifact_is_missing(phased_app, phase_env):
    shown = phase(phase_env)
    assert shown.returncode == 1 and "issue-1: UNMET (at design)" in shown.stdout
    refused = phase(phase_env, "next")
    assert refused.returncode == 1
    assert "design is not done: required artifact is missing (docs/specs/issue-1/design.md)" in (
        refused.stderr
    )
    assert item_row(phased_app).phase == "design"
    assert phased_app.events("workitem.phase") == []


def test_a_one_byte_artifact_is_refused_by_phase_next_and_by_the_app(phased_app, phase_env):
    """The same rule on both sides: `phase next` refuses at once, saying what an artifact
    needs; asked directly, the App refuses what the spawner saw too."""
    write(phase_env, "design.md", "x")
    refused = phase(phase_env, "next")
    assert refused.returncode == 1
    assert "required artifact is empty or too short (docs/specs/issue-1/design.md)" in (
        refused.stderr
    )
    assert "a Markdown heading" in refused.stderr
    headers = {"Authorization": f"Bearer {phase_env['THE_LOOP_SESSION_TOKEN']}"}
    body = {"work_item_id": ITEM, "from": "design", "artifacts": ["design.md"]}
    asked = httpx.post(f"{phased_app.url}/spawner/v1/phase", json=body, headers=headers, timeout=10)
    assert asked.status_code == 425
    assert "empty or too short (docs/specs/issue-1/design.md)" in asked.json()["error"]
    assert item_row(phased_app).phase == "design" and phased_app.events("workitem.phase") == []


def test_the_walk_to_review_then_approval_then_complete(phased_app, phase_env, fake_github):
    fake, _ = fake_github
    write(phase_env, "design.md")
    moved = phase(phase_env, "next")
    assert moved.returncode == 0, moved.stderr
    assert "Moved from design to implementation." in moved.stdout
    state = read_state(state_path(Path(phase_env["CHECKOUT"]), SPEC))
    assert state is not None and state.currentNode == "implementation"
    assert item_row(phased_app).phase == "implementation"
    (event,) = phased_app.events("workitem.phase")
    assert event["from"] == "design" and event["to"] == "implementation"
    assert event["artifacts"] == ["design.md"]

    # No task list and tasks-breakdown skipped: implementation passes; verification needs its file.
    assert phase(phase_env, "next").returncode == 0
    assert "verification is not done" in phase(phase_env, "next").stderr
    write(phase_env, "verification.md")
    at_review = phase(phase_env, "next")
    assert at_review.returncode == 0 and "to review" in at_review.stdout
    (review,) = marked(fake, MarkerKind.REVIEW)
    assert "`docs/specs/issue-1/design.md`" in review["body"]
    assert "the-loop approve" in review["body"]
    waiting = phase(phase_env, "next")
    assert waiting.returncode == 1 and "review waits for a human decision" in waiting.stderr
    wait_for(lambda: "waiting on a human" in progress_of(fake))

    fake.grant(REPO, "mallory", "read")
    deliver(
        phased_app, "issue_comment", comment("the-loop approve", login="mallory", cid=5002), "m"
    )
    (refusal,) = marked(fake, MarkerKind.REFUSAL)
    assert "did not approve the review" in refusal["body"] and "@mallory" in refusal["body"]
    assert not (item_row(phased_app).gates or {}).get("review")

    deliver(phased_app, "issue_comment", comment("the-loop approve LGTM", cid=5003), "approve")
    row = item_row(phased_app)
    assert row.gates["review"]["by"] == "Codertocat"
    (delivery,) = jobs(phased_app, JobKind.DELIVER)
    assert delivery.payload["gates"]["review"]["by"] == "Codertocat"
    assert "Run `the-loop phase next` to complete" in delivery.payload["body"]

    done = phase(phase_env, "next")
    assert done.returncode == 0 and "The work item is complete." in done.stdout
    assert item_row(phased_app).state == WorkItemStatus.DONE
    assert phased_app.events("workitem.done")
    wait_for(lambda: "**Done.**" in progress_of(fake))
    assert len(marked(fake, MarkerKind.PROGRESS)) == 1  # edited in place, never a second


def test_changes_send_the_work_back_to_implementation(phased_app, phase_env):
    write(phase_env, "design.md")
    write(phase_env, "verification.md")
    for _ in range(3):
        assert phase(phase_env, "next").returncode == 0
    assert item_row(phased_app).phase == "review"
    body = "the-loop changes please handle the empty list too"
    deliver(phased_app, "issue_comment", comment(body, cid=5010), "changes")
    row = item_row(phased_app)
    assert row.phase == "implementation" and "review" not in (row.gates or {})
    (delivery,) = jobs(phased_app, JobKind.DELIVER)
    assert delivery.payload["phase"] == "implementation"
    assert delivery.payload["body"].startswith("please handle the empty list too")
    # The session's view was stale: the App holds implementation now.
    stale = phase(phase_env, "next")
    assert stale.returncode == 0 and "Moved from implementation to verification." in stale.stdout


def test_a_session_cannot_jump_ahead_through_the_api(phased_app, phase_env):
    headers = {"Authorization": f"Bearer {phase_env['THE_LOOP_SESSION_TOKEN']}"}
    url = f"{phased_app.url}/spawner/v1/phase"
    body = {"work_item_id": ITEM, "from": "verification", "artifacts": ["verification.md"]}
    stale = httpx.post(url, json=body, headers=headers, timeout=10)
    assert stale.status_code == 409 and "is at design" in stale.json()["error"]
    assert stale.json()["code"] == "stale-move"
    other = httpx.post(url, json={**body, "work_item_id": "github:o/other#1"}, headers=headers)
    assert other.status_code in (403, 404)
    nobody = httpx.post(url, json=body, timeout=10)
    assert nobody.status_code == 401 and nobody.json()["code"] == "bad-token"
    assert item_row(phased_app).phase == "design"


def test_an_agent_editing_the_state_file_gains_nothing(phased_app, phase_env):
    """The App's pointer is what `phase next` moves from; an edited file is rewritten."""
    write(phase_env, "design.md")
    path = state_path(Path(phase_env["CHECKOUT"]), SPEC)
    path.write_text(json.dumps({"workItem": SPEC, "currentNode": "review"}))
    shown = phase(phase_env)
    assert "(at design)" in shown.stdout
    assert phase(phase_env, "next").returncode == 0
    state = read_state(path)
    assert state is not None and state.currentNode == "implementation"
    assert item_row(phased_app).phase == "implementation"


def test_the_progress_comment_is_edited_not_reposted(phased_app, phase_env, fake_github):
    fake, _ = fake_github
    wait_for(lambda: marked(fake, MarkerKind.PROGRESS))
    first = marked(fake, MarkerKind.PROGRESS)[0]["id"]
    write(phase_env, "design.md")
    assert phase(phase_env, "next").returncode == 0
    wait_for(lambda: "| ▶️ | `implementation` | current |" in progress_of(fake), timeout=15)
    assert [c["id"] for c in marked(fake, MarkerKind.PROGRESS)] == [first]
    assert fake.calls("PATCH", rf"/issues/comments/{first}$")
    with phased_app.state.sessions() as db:
        job_count = len(db.scalars(select(Job)).all())
    assert job_count == 1  # moving on queues nothing for the spawner


def test_a_move_is_taken_only_on_what_the_spawner_saw_on_the_host(phased_app, phase_env, tmp_path):
    """The session's word is not enough: no report, a report without the artifact, or an
    artifact that is a link (to a real file outside the checkout) leave the pointer where
    it is, with the reason; `phase next` waits for the spawner's look."""
    headers = {"Authorization": f"Bearer {phase_env['THE_LOOP_SESSION_TOKEN']}"}
    url = f"{phased_app.url}/spawner/v1/phase"
    body = {"work_item_id": ITEM, "from": "design", "artifacts": ["design.md"]}
    unseen = httpx.post(url, json=body, headers=headers, timeout=10)
    assert unseen.status_code == 425 and unseen.json()["code"] == "not-seen-yet"
    assert "the devbox has not reported what it sees" in unseen.json()["error"]
    spawner_sees(phase_env)  # an empty checkout
    missing = httpx.post(url, json=body, headers=headers, timeout=10)
    assert missing.status_code == 425
    assert "required artifact is missing (docs/specs/issue-1/design.md)" in missing.json()["error"]

    outside = tmp_path / "elsewhere.md"
    outside.write_text(artifact("A design somewhere else"))
    folder = Path(phase_env["CHECKOUT"]) / "docs" / "specs" / SPEC
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "design.md").symlink_to(outside)
    spawner_sees(phase_env)
    linked = phase({**phase_env, "THE_LOOP_PHASE_WAIT": "2"}, "next")
    assert linked.returncode == 1
    assert "design is not done as the devbox sees it: required artifact is missing" in (
        linked.stderr
    )
    assert item_row(phased_app).phase == "design" and phased_app.events("workitem.phase") == []

    (folder / "design.md").unlink()
    (folder / "design.md").write_text(artifact())
    waiting = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "phase", "next"],
        cwd=phase_env["CHECKOUT"],
        env=phase_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(2)  # it asks, hears 425, and asks again every second meanwhile
        assert waiting.poll() is None
        spawner_sees(phase_env)  # the look it was waiting for
        out, err = waiting.communicate(timeout=60)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    assert waiting.returncode == 0, err
    assert "Moved from design to implementation." in out
    (moved,) = phased_app.events("workitem.phase")
    assert moved["artifacts"] == ["design.md"]
