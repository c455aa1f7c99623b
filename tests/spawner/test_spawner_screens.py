"""The real Claude Code binary in tmux, offline, launched by the spawner: the trust pre-seed
and the bypass pre-accept remove the dialogs they are for, and the watchdog names the screen
a session really waits at (or sees it die) instead of calling it running."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.audit import read_jsonl
from app.config.operator_config import parse_config
from app.protocol import SpawnJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.harness.claude_screens import PROMPT_MARK
from app.spawner.jobkinds import run_job
from app.spawner.naming import item_slug
from app.spawner.session.watchdog import Watchdog
from tests.claude_support import QUIET_ENV
from tests.spawner_support import bare_repository, gateway_context
from tests.support import wait_for

pytestmark = [
    pytest.mark.claude,
    pytest.mark.skipif(shutil.which("claude") is None, reason="claude is not installed"),
]
KEY = "sk-ant-dummy-key-for-tests"
BYPASS = "--dangerously-skip-permissions"
DEAD = "http://127.0.0.1:9"  # the discard port: nothing answers there


@dataclass
class Box:
    ctx: SpawnerContext
    dog: Watchdog
    item: str

    def capture(self) -> str:
        return self.ctx.runner.capture(item_slug(self.item))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_jsonl(self.ctx.events.path) if e["event"] == name]


def make_box(
    base: Path,
    name: str,
    *,
    args: list[str],
    trust: bool,
    env: dict[str, str],
    approve_key: bool = False,
) -> Box:
    home = base / name / "home"
    home.mkdir(parents=True)
    claude_json: dict[str, Any] = {"hasCompletedOnboarding": True}
    if approve_key:
        claude_json["customApiKeyResponses"] = {"approved": [KEY[-20:]], "rejected": []}
    (home / ".claude.json").write_text(json.dumps(claude_json))
    config = parse_config(
        {
            "harnesses": [{"name": "claude", "args": args}],
            "routing": {
                "workspace": {"root": str(base / name / "work")},
                "harnessTrust": {"enabled": trust},
            },
        }
    )
    full_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "ANTHROPIC_API_KEY": KEY,
        **QUIET_ENV,  # never let a test's claude auto-update the machine's shared install
        **env,
    }
    # Its gateway's upstream is an address nothing answers: no model is needed to see the
    # screens a session shows before its first answer.
    ctx = gateway_context(
        config,
        full_env,
        home,
        base / name / "state",
        tmux="the-loop-test",
        size=(120, 36),
        upstream_env={**full_env, "ANTHROPIC_BASE_URL": DEAD},
    )
    item = f"github:o/{name}#1"
    origin = bare_repository(base / name)
    payload = {
        "work_item_id": item,
        "spec_id": "issue-1",
        "repo": f"o/{name}",
        "issue_number": 1,
        "clone_url": str(origin),
        "frozen": {},
        "gh_event": "issue_comment",
        "action": "created",
        "prompt": "hello",
    }
    ok, _, error = run_job(ctx, ClaimedJob(1, SpawnJob.model_validate(payload), 60))
    assert ok, error
    return Box(ctx, Watchdog(ctx.runner, ctx.registry, ctx.events.emit), item)


@pytest.fixture
def boxes(tmp_path: Path) -> Iterator[dict[str, Box]]:
    made: dict[str, Box] = {}
    try:
        made["trusted"] = make_box(tmp_path, "trusted", args=[], trust=True, env={})
        made["untrusted"] = make_box(tmp_path, "untrusted", args=[], trust=False, env={})
        made["bypass"] = make_box(
            tmp_path, "bypass", args=[BYPASS], trust=True, env={"IS_SANDBOX": "1"}, approve_key=True
        )
        if os.geteuid() == 0:
            made["root"] = make_box(
                tmp_path, "root", args=[BYPASS], trust=True, env={}, approve_key=True
            )
        yield made
    finally:
        for box in made.values():
            box.ctx.runner.kill_server()
            if box.ctx.models is not None:
                box.ctx.models.close()


def settled(box: Box, event: str) -> list[dict[str, Any]]:
    box.dog.tick()
    return box.events(event)


def test_real_screens_after_the_spawner_prepared_each_session(boxes: dict[str, Box]) -> None:
    untrusted = wait_for(lambda: settled(boxes["untrusted"], "session.stalled"), timeout=60)
    # Pre-trusted, with the gateway's pass approved in its home: no trust dialog and no
    # API-key question; its prompt goes straight into the input box.
    trusted = boxes["trusted"]
    assert len(wait_for(lambda: settled(trusted, "session.prompted"), timeout=60)) == 1
    wait_for(lambda: f"{PROMPT_MARK} hello" in trusted.capture(), timeout=30)
    assert "Quick safety check" not in trusted.capture()
    assert "Do you want to use this API key" not in trusted.capture()
    assert settled(trusted, "session.stalled") == []
    # Without the pre-seed the real trust dialog blocks, and is named as such.
    assert untrusted[0]["screen"] == "trust-dialog"
    # Bypass pre-accepted and key approved: the session runs in bypass mode, not stalled.
    bypass = boxes["bypass"]
    wait_for(lambda: "bypass permissions on" in bypass.capture(), timeout=60)
    assert settled(bypass, "session.stalled") == []
    # Its prompt was pasted into the real input box once it showed, as one message (by the
    # watchdog when the box took longer than the launch waits).
    assert len(wait_for(lambda: settled(bypass, "session.prompted"), timeout=60)) == 1
    wait_for(lambda: f"{PROMPT_MARK} hello" in bypass.capture(), timeout=30)
    if "root" in boxes:
        # A root spawner's session runs as the session's user, not root: Claude Code takes
        # the bypass flag with no IS_SANDBOX (as root it would refuse it and exit).
        root = boxes["root"]
        wait_for(lambda: "bypass permissions on" in root.capture(), timeout=60)
        assert settled(root, "session.exited") == []
        assert "root/sudo" not in root.capture()
