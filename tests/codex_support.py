"""The real `codex` binary under test: where it is, and the spawner environment that points
the model gateway's Responses upstream at the scripted model (tests/fakes/responses_api.py).

Codex reads no base URL from its environment (`OPENAI_BASE_URL` is ignored): the session's
`config.toml`, written by the spawner's Codex adapter, names the model gateway as its
provider; the spawner's own `OPENAI_BASE_URL` / `OPENAI_API_KEY` say where the gateway
forwards and with which key, as they would on a devbox. `sandboxed_codex_devbox` is a spawner context whose Codex
sessions run in its sandbox against a scripted model.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass, replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from app.spawner.naming import item_slug
from tests.claude_support import GENEROUS
from tests.fakes.responses_api import (
    FakeResponses,
    Reply,
    Step,
    anything,
    contains,
    exec_command,
    tool_result_for,
)
from tests.jobs_support import deliver_job, events, run_ok, spawn_job
from tests.spawner_support import bare_repository, gateway_context
from tests.support import wait_for

DUMMY_OPENAI_KEY = "sk-proj-scripted-model-dummy-key-000000"


def codex_binary() -> str:
    """`$THE_LOOP_CODEX` or `codex` on PATH; a skip where there is none, a failure in CI."""
    found = shutil.which(os.environ.get("THE_LOOP_CODEX") or "codex")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install the codex binary: its tests never skip there")
        pytest.skip("codex is not installed")
    return found


def codex_upstream_env(base_url: str) -> dict[str, str]:
    """The spawner's settings for the Responses upstream: the scripted model, a dummy key."""
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": DUMMY_OPENAI_KEY}


def sandboxed_codex_devbox(tmp_path: Path, model: FakeResponses, **settings: Any) -> SpawnerContext:
    """A spawner context whose Codex sessions run the real `codex` in bubblewrap against
    `model`, through the spawner's model gateway (the operator's own Codex config names the
    scripted model); `settings` are top-level keys of the operator's config."""
    home = tmp_path / "devbox-home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "scripted-model"\n')
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        **codex_upstream_env(model.base_url),
    }
    config = parse_config(
        {
            "harnesses": [
                {"name": "claude", "default": True},
                {"name": "codex", "command": codex_binary()},
            ],
            "routing": {
                "workspace": {"root": str(tmp_path / "work")},
                "sandbox": {"mode": "bubblewrap"},
            },
            **settings,
        }
    )
    hosts = frozenset({"claude", "codex"})
    return gateway_context(
        config, env, home, tmp_path / "state", tmux="the-loop-cx", hosts=hosts, ready_timeout=90.0
    )


GATE_ITEM = "github:o/r#1"
GATE_MISSING = "required artifact is missing (docs/specs/issue-1/"


def hostile_gate_script(prompt: str, command: str, marker: str) -> list[Step]:
    """A session asked `prompt` runs `command` in its shell and, once its output holds
    `marker`, tries to stop: gated in place, then relaunched ("Are you still there?") and
    gated again. One nudge per stop, so each blocked stop is followed by one that ends."""
    return [
        Step(contains(prompt), Reply("On it.", (exec_command(command),))),
        Step(tool_result_for("exec_command", marker), Reply("Done; stopping.")),
        Step(contains(GATE_MISSING), Reply("Stopping anyway."), name="gated in place"),
        Step(contains("Are you still there?"), Reply("Yes; stopping."), name="relaunched"),
        Step(contains(GATE_MISSING), Reply("Stopping anyway."), name="gated after relaunch"),
        *[Step(anything, Reply("Stopping.")) for _ in range(4)],
    ]


@dataclass
class HostileGateRun:
    """One hostile Codex session of `hostile_gate_script`, at a phase whose artifact is
    missing (so each stop is gated), its gate calls counted by the App in `hits`."""

    model: FakeResponses
    ctx: SpawnerContext
    origin: Path
    hits: list[str]

    def start(self, prompt: str) -> None:
        job = spawn_job(self.origin, item=GATE_ITEM, prompt=prompt, harness="codex", model="")
        at_a_phase = job.payload.model_copy(update={"phase": "requirements-definition"})
        run_ok(self.ctx, replace(job, payload=at_a_phase))

    def shown(self, name: str) -> Any:
        """The request of step `name`; on a timeout, the error shows the pane and the
        App's gate calls too."""
        index = next(i for i, s in enumerate(self.model.steps) if s.name == name)
        try:
            return self.model.wait_for_step(index, timeout=GENEROUS)
        except AssertionError as exc:
            record = self.ctx.registry.get(GATE_ITEM)
            screen = self.ctx.runner.capture(record.tmux_session) if record else "(none)"
            raise AssertionError(f"{exc}\n{screen}\nthe App was asked: {self.hits}") from None

    def report(self, marker: str) -> Any:
        """The JSON the session's command printed after `marker`, as the model saw it."""
        said = next(r for r in self.model.main_requests() if marker in r.turn.text)
        return json.loads(said.turn.text.split(marker, 1)[1].strip().splitlines()[0])

    def relaunch(self) -> None:
        """Kill the session's pane and deliver a follow-up: the spawner resumes it, and
        Codex reads every file the session wrote; the App's count starts again."""
        record = self.ctx.registry.get(GATE_ITEM)
        assert record is not None
        self.ctx.runner.kill(record.tmux_session, owner=GATE_ITEM)
        wait_for(lambda: (p := self.ctx.runner.pane(item_slug(GATE_ITEM))) is None or p.dead)
        self.hits.clear()
        result = run_ok(self.ctx, deliver_job(self.origin, "Are you still there?", item=GATE_ITEM))
        assert result["respawned"] is True
        (respawned,) = events(self.ctx, "session.respawned")
        assert "resume" in respawned["argv"]


def hostile_gate_run(
    tmp_path: Path, model: FakeResponses, app: ThreadingHTTPServer
) -> HostileGateRun:
    """A sandboxed Codex devbox whose gate allows one attempt and asks `app`."""
    ctx = sandboxed_codex_devbox(tmp_path, model, stop_gate={"max_attempts": 1})
    ctx.app_url = f"http://127.0.0.1:{app.server_address[1]}"
    hits: list[str] = app.hits  # type: ignore[attr-defined]
    return HostileGateRun(model, ctx, bare_repository(tmp_path), hits)
