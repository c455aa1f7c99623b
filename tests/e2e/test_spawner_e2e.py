"""Spec 000 R4, end to end: the App (real webhooks, gate, inbox worker, spawner API) and the
spawner (real tmux, real git) composed the way `the-loop up` composes them.

With the launch flag declared only under `harnesses[].args`, an issue released by an
`issue_comment` gets a session whose argv carries every configured argument — checked from
the spawner's `events.jsonl` alone — and the model frozen by that reply reaches its argv.
Later comments reach the session; an unauthorized one does not.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from app.audit import read_jsonl
from app.spawner.context import SpawnerContext
from app.spawner.harness.claude import DENY_TOKEN
from app.spawner.workspace.checkout import checkout_dir
from app.store.tables import WorkItemStatus
from tests.devbox_support import release, serve_devbox
from tests.gate_support import (
    ITEM,
    comment,
    deliver,
    item_row,
    progress_of,
)
from tests.spawner_support import StandIn, bare_repository
from tests.support import OPERATOR_TOKEN, wait_for

pytestmark = pytest.mark.admin_token  # the operator may read /status

FLAGS = ["--dangerously-skip-permissions", "--add-dir", "/srv/shared docs"]
SQLITE = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def operator_yaml_of(standin: StandIn, tmp_path: Path) -> str:
    return f"""
harnesses:
  - name: claude
    default: true
    command: {standin.path}
    args: {FLAGS!r}
models:
  - {{name: opus, id: claude-opus-4-1}}
  - {{name: sonnet}}
effort: [low, high]
routing:
  workspace: {{root: {tmp_path / "work"}}}
  sandbox: {standin.sandbox!r}
"""


OPERATOR_YAML = operator_yaml_of


def spawned_with_missing_args(events_path: Path, configured: list[str]) -> list[dict[str, Any]]:
    """The R4 check, on events.jsonl alone: released spawns lacking a configured argument."""
    return [
        e
        for e in read_jsonl(events_path)
        if e["event"] == "session.spawned"
        and e.get("gh_event") == "issue_comment"
        and not all(arg in e.get("harness_args", []) for arg in configured)
    ]


@SQLITE
def test_a_released_issue_launches_with_every_declared_arg_and_the_frozen_model(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    origin = bare_repository(tmp_path)
    release(running_app, fake, origin, "the-loop execute\n\n- [x] model-opus\n- [x] effort-high")
    start = standin.wait_start(ITEM, timeout=30)
    argv = start["argv"]
    assert argv[0] == str(standin.path) and argv[1] == "--session-id"
    assert argv[3:10] == [*FLAGS, "--model", "claude-opus-4-1", "--effort", "high"]
    assert argv[10:] == [DENY_TOKEN]
    wait_for(lambda: b"Spelling error in the README file" in standin.stdin(ITEM))
    assert start["cwd"] == str(checkout_dir(tmp_path / "work", ITEM))
    spawned = [e for e in read_jsonl(standin_devbox.events.path) if e["event"] == "session.spawned"]
    assert len(spawned) == 1 and spawned[0]["gh_event"] == "issue_comment"
    assert spawned_with_missing_args(standin_devbox.events.path, FLAGS) == []
    assert spawned[0]["model"] == "opus" and spawned[0]["effort"] == "high"
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.RUNNING)
    # The job's result sets the launch facts (the launch event may come first). It is sent
    # once the first message is confirmed in the box, which a loaded machine may take
    # seconds over: the wait is for the facts, not for the speed.
    wait_for(lambda: "harness_args" in (item_row(running_app).session or {}), timeout=60)
    assert item_row(running_app).session["harness_args"] == spawned[0]["harness_args"]  # type: ignore[index]


@SQLITE
def test_later_comments_reach_the_session_and_unauthorized_ones_do_not(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
    standin.wait_start(ITEM, timeout=30)
    wait_for(lambda: (standin.folder(ITEM) / "stdin.bin").exists())
    deliver(
        running_app, "issue_comment", comment("mallory says: rm -rf", login="mallory", cid=6), "c-6"
    )
    deliver(running_app, "issue_comment", comment("please also cover the empty list", cid=7), "c-7")
    wait_for(lambda: b"please also cover the empty list" in standin.stdin(ITEM), timeout=20)
    wait_for(lambda: any(r["target_id"] == 7 for r in fake.reactions), timeout=20)
    assert b"mallory" not in standin.stdin(ITEM)
    assert not any(r["target_id"] == 6 for r in fake.reactions)
    assert running_app.events("comment.ignored")


@SQLITE
def test_a_launch_that_fails_says_why_on_the_issue_and_the_status_page(
    running_app: Any,
    fake_github: Any,
    standin_devbox: SpawnerContext,
    standin: StandIn,
    tmp_path: Path,
) -> None:
    fake, _ = fake_github
    standin.path.unlink()  # the declared harness is gone from the devbox
    release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
    wait_for(lambda: item_row(running_app).state == WorkItemStatus.EXITED, timeout=30)
    reason = f"{standin.path} is not on PATH"
    assert reason in str((item_row(running_app).session or {}).get("failure"))

    wait_for(lambda: "could not start" in progress_of(fake), timeout=30)
    assert reason in progress_of(fake)
    jobs = [e for e in read_jsonl(standin_devbox.events.path) if e["event"] == "session.job_failed"]
    assert jobs and jobs[0]["kind"] == "spawn"
    wait_for(lambda: running_app.events("session.job_failed"), timeout=30)  # the App took it
    bearer = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    recent = httpx.get(f"{running_app.url}/status", headers=bearer).json()["recent"]
    shown = next(r for r in recent if r["work_item_id"] == ITEM)
    assert shown["health"] == "exited" and reason in shown["note"]


@SQLITE
def test_a_devbox_given_no_model_credential_refuses_the_launch_and_says_so(
    running_app: Any, fake_github: Any, operator_yaml: str, standin: StandIn, tmp_path: Path
) -> None:
    """A session the gateway could not answer would retry for minutes, then sit at its
    prompt: the launch is refused instead, and the issue says what to set."""
    fake, _ = fake_github
    home = tmp_path / "no-key-home"
    home.mkdir()
    with serve_devbox(running_app, operator_yaml, home, model_key=None) as ctx:
        release(running_app, fake, bare_repository(tmp_path), "the-loop execute")
        wait_for(lambda: item_row(running_app).state == WorkItemStatus.EXITED, timeout=30)
        wait_for(lambda: "could not start" in progress_of(fake), timeout=30)
        assert "no model credential" in progress_of(fake)
        assert "ANTHROPIC_API_KEY" in progress_of(fake)
        assert ctx.registry.get(ITEM) is None  # no session was started
    assert standin.starts(ITEM) == []  # the harness never ran
