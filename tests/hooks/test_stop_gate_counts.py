"""The stop gate of a session a spawner started keeps its attempt counts on the App, where the
session cannot write them: the real gate as Claude Code runs it (a subprocess with the
session's environment), a real App over HTTP, a real checkout."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.fleet.tokens import mint_session_token
from tests.gate_support import ITEM, REPO, comment, deliver, labeled
from tests.stopgate_support import at, gate, make_checkout
from tests.support import artifact, free_port

pytestmark = pytest.mark.app_env(THE_LOOP_GATE_ATTEMPT_GAP="0")

EXECUTE = (
    "the-loop execute\n- [ ] requirements-definition\n- [x] design\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n"
)


@pytest.fixture
def session(running_app: Any, fake_github: Any, tmp_path: Path) -> dict[str, str]:
    """An executed item at `design`, and what its session's gate is given by the spawner."""
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label")
    deliver(running_app, "issue_comment", comment(EXECUTE, cid=5001), "execute")
    with running_app.state.sessions() as db, db.begin():
        token = mint_session_token(db, ITEM, datetime.now(UTC))
    return {
        "THE_LOOP_URL": running_app.url,
        "THE_LOOP_WORK_ITEM_ID": ITEM,
        "THE_LOOP_SESSION_TOKEN": token,
    }


def prefill(tmp_path: Path) -> None:
    """What a session can write in its own home: a count file saying every nudge is spent."""
    folder = tmp_path / "state" / "stop-gate" / "issue-1"
    folder.mkdir(parents=True)
    for name in ("a.json", "b.json"):
        record = {"workItem": "issue-1", "attempts": {"design": 99, "implementation": 99}}
        (folder / name).write_text(json.dumps(record))


def test_the_app_counts_the_nudges_and_a_count_file_in_reach_is_ignored(tmp_path, session):
    checkout = make_checkout(tmp_path / "repo", at("design"))
    prefill(tmp_path)
    results = [gate(tmp_path, checkout, **session) for _ in range(4)]
    assert [r.returncode for r in results] == [2, 2, 2, 0]
    assert [f"(attempt {n}/3)" in r.stderr for n, r in enumerate(results[:3], 1)] == [True] * 3
    message = json.loads(results[3].stdout)["systemMessage"]
    assert "design is still not complete after 3 attempts" in message
    (checkout / "docs/specs/issue-1/design.md").write_text(artifact())
    assert gate(tmp_path, checkout, **session).returncode == 0


@pytest.mark.app_env(THE_LOOP_GATE_ATTEMPT_GAP="3600")
def test_a_session_cannot_run_its_count_up_ahead(tmp_path, session, running_app):
    """Asking the App over and over (as the session can, with its own token) counts once per
    gap: the gate still blocks, at its first attempt."""
    headers = {"Authorization": f"Bearer {session['THE_LOOP_SESSION_TOKEN']}"}
    for _ in range(10):
        asked = httpx.post(
            f"{running_app.url}/spawner/v1/gate",
            json={"work_item_id": ITEM, "node": "design"},
            headers=headers,
            timeout=10,
        )
        assert asked.status_code == 200 and asked.json()["attempt"] == 1
    checkout = make_checkout(tmp_path / "repo", at("design"))
    blocked = gate(tmp_path, checkout, **session)
    assert blocked.returncode == 2 and "(attempt 1/3)" in blocked.stderr
    other = httpx.post(
        f"{running_app.url}/spawner/v1/gate",
        json={"work_item_id": "github:o/other#1", "node": "design"},
        headers=headers,
        timeout=10,
    )
    assert other.status_code in (403, 404)


def test_an_app_that_cannot_be_reached_is_a_block_not_a_free_turn(tmp_path, session):
    checkout = make_checkout(tmp_path / "repo", at("design"))
    prefill(tmp_path)
    away = {**session, "THE_LOOP_URL": f"http://127.0.0.1:{free_port()}"}
    for _ in range(4):
        result = gate(tmp_path, checkout, **away)
        assert result.returncode == 2
        assert "the App could not count this attempt" in result.stderr


def test_a_filed_gate_counts_on_the_app_the_file_names(tmp_path, session):
    """A sandboxed session's gate reads the spawner's facts file: an environment that blanks
    the item, points at another App and lowers the cap moves nothing."""
    checkout = make_checkout(tmp_path / "repo", at("design"))
    facts = {
        "THE_LOOP_WORK_ITEM": "issue-1",
        "THE_LOOP_WORK_ITEM_ID": ITEM,
        "THE_LOOP_URL": session["THE_LOOP_URL"],
        "THE_LOOP_GATE_MAX_ATTEMPTS": "2",
        "CLAUDE_PROJECT_DIR": str(checkout),
    }
    (tmp_path / "gate.json").write_text(json.dumps(facts))
    hostile = {
        "THE_LOOP_URL": f"http://127.0.0.1:{free_port()}",
        "THE_LOOP_WORK_ITEM_ID": "github:o/r#999",
        "THE_LOOP_GATE_MAX_ATTEMPTS": "1",
        "THE_LOOP_SESSION_TOKEN": session["THE_LOOP_SESSION_TOKEN"],
    }
    args = ("--facts", str(tmp_path / "gate.json"))
    results = [gate(tmp_path, checkout, item="", args=args, **hostile) for _ in range(3)]
    assert [r.returncode for r in results] == [2, 2, 0]
    assert "(attempt 1/2)" in results[0].stderr and "(attempt 2/2)" in results[1].stderr
    assert "design is still not complete after 2 attempts" in results[2].stdout
