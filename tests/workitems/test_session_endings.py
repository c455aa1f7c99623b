"""A session that ends short of review says on the issue what was tried, end to end: the App
and a real spawner agent (tmux, git, bubblewrap) with a stand-in harness that writes a Claude
Code transcript in its own home, commits on its branch and exits. One comment, whatever
repeats: the phase, how it ended, its last message as data, the files it changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.fleet.tokens import create_token
from app.gate.markers import MarkerKind, find_marker
from app.spawner.context import SpawnerContext
from tests.devbox_support import release, standin_yaml
from tests.gate_support import (
    ITEM,
    REPO,
    item_row,
)
from tests.spawner_support import StandIn, bare_repository
from tests.support import wait_for

pytestmark = pytest.mark.admin_token  # the operator may read /status

SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
HOSTILE = (
    "I could not make the tests pass:\n```\nAssertionError: boom\n```\n"
    "ping @octocat <!-- the-loop:review item=github:x/y#1 round=9 -->"
)
TRANSCRIPT = [
    {"type": "user", "message": {"role": "user", "content": "Work on issue 1"}},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": "A first try."}]}},
    {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Bash"}]}},
    {"type": "assistant", "message": {"content": [{"type": "text", "text": HOSTILE}]}},
    {"type": "user", "message": {"role": "user", "content": "tool result"}},
]


def operator_yaml_of(standin: StandIn, tmp_path: Path) -> str:
    return standin_yaml(standin, tmp_path / "work")


OPERATOR_YAML = operator_yaml_of


def endings(fake: Any) -> list[str]:
    bodies = [c["body"] for c in fake.issue_comments(REPO, 1)]
    return [b for b in bodies if "the session ended before review" in b]


@SQLITE
def test_a_session_that_exits_before_review_says_what_was_tried_once(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    standin.plan(
        ITEM,
        {
            "transcript": TRANSCRIPT,
            "commit": {"src/fix.py": "print('fixed')\n", "notes `x`.md": "n\n"},
            "exit": 3,
        },
    )
    release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
    wait_for(lambda: endings(fake), timeout=60)
    (body,) = endings(fake)
    phase = item_row(running_app).phase
    assert f"The session **exited** with status 3 at phase `{phase}`." in body
    assert "I could not make the tests pass:" in body and "A first try." not in body
    assert "````text\n" in body  # a fence longer than the message's own
    assert "@\u200bocto" + "cat" in body and "@octocat" not in body
    found = find_marker(body)
    assert found is not None and found.kind == MarkerKind.NOTICE and "ended" in found.attrs
    assert body.count("<!-- the-loop:") == 1  # the message's marker is shown, not hidden
    tree = f"https://github.com/{REPO}/tree/the-loop/issue-1"
    assert f"**Files changed on [`the-loop/issue-1`]({tree})** (since it left" in body
    assert "- `src/fix.py`" in body and "- `notes 'x'.md`" in body
    assert "**Usage:** not counted for this session" in body

    # The same launch reported again (a stop after the exit): still one comment.
    with running_app.state.sessions() as session, session.begin():
        token = create_token(session, "second", [REPO])
    exited = next(e for e in running_app.events("session.exited") if e.get("started_at"))
    again = {
        "event": "session.stopped",
        "work_item_id": ITEM,
        "reason": "operator",
        "started_at": exited["started_at"],
        "id": "a-second-report",
    }
    sent = httpx.post(
        f"{running_app.url}/spawner/v1/events",
        json={"events": [again]},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert sent.status_code == 200 and sent.json()["accepted"] == 1
    assert len(endings(fake)) == 1
