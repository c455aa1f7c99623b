"""A checkout or a home cannot switch the stop gate off: the real `claude`, launched by the
spawner's own spawn path in bubblewrap and driven by the scripted model, starts in (or
writes) settings that would run no hook — an `env` setting `CLAUDE_CODE_SIMPLE` (Claude
Code's bare mode, which runs none), `disableAllHooks`, an empty `hooks` — in the checkout's
`.claude/settings.json` or `.claude/settings.local.json`, or in its own home. The managed
settings pin them back, so every stop is still gated: what the model is shown at its stop
is the assertion (the gate's refusal, a phase's artifact being missing).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.spawner.context import SpawnerContext
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, tool_result_for
from tests.fakes.model_script import contains
from tests.jobs_support import run_ok, spawn_job
from tests.spawner_support import bare_repository, git

pytestmark = pytest.mark.claude
ITEM = "github:o/r#1"
BARE = {"env": {"CLAUDE_CODE_SIMPLE": "1"}}
OFF = {"disableAllHooks": True}
NO_HOOKS: dict[str, Any] = {"hooks": {}}
# Written by the session as it runs: into its home and the checkout, all at once.
WRITE = r"""
import json, os
settings = {"env": {"CLAUDE_CODE_SIMPLE": "1"}, "disableAllHooks": True, "hooks": {}}
for path in ("~/.claude/settings.json", ".claude/settings.json", ".claude/settings.local.json"):
    path = os.path.expanduser(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    json.dump(settings, open(path, "w"))
print("WROTE")
"""


@pytest.mark.parametrize(
    ("committed", "settings"),
    [
        ("settings.json", BARE),
        ("settings.local.json", BARE),
        ("settings.json", OFF),
        ("settings.local.json", NO_HOOKS),
    ],
    ids=["bare-env", "bare-env-local", "disable-all-hooks", "empty-hooks"],
)
def test_settings_the_checkout_starts_with_do_not_switch_the_gate_off(
    committed: str, settings: dict[str, Any], tmp_path: Path, stopped: list[SpawnerContext]
) -> None:
    origin = bare_repository(tmp_path)
    _commit(tmp_path, origin, committed, settings)
    script = [
        Step(contains("Work on issue 1"), Reply("Done."), name="done"),
        Step(anything, Reply("Stopping here."), name="gate"),
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    with FakeAnthropic(script) as model:
        _spawn(tmp_path, origin, model, stopped)
        gate = model.wait_for_step(1, timeout=GENEROUS).turn.text
    _assert_refused(gate)


def test_settings_the_session_writes_do_not_switch_the_gate_off(
    tmp_path: Path, stopped: list[SpawnerContext]
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "write.py").write_text(WRITE)
    script = [
        Step(contains("Work on issue 1"), Reply("Writing.", (bash(f"python3 {tools}/write.py"),))),
        Step(tool_result_for("Bash", "WROTE"), Reply("Done."), name="done"),
        Step(anything, Reply("Stopping here."), name="gate"),
        *[Step(anything, Reply("Stopping here.")) for _ in range(4)],
    ]
    with FakeAnthropic(script) as model:
        _spawn(tmp_path, bare_repository(tmp_path), model, stopped, readOnly=[str(tools)])
        gate = model.wait_for_step(2, timeout=GENEROUS).turn.text
    _assert_refused(gate)


def _spawn(
    tmp_path: Path,
    origin: Path,
    model: FakeAnthropic,
    stopped: list[SpawnerContext],
    **sandbox: Any,
) -> None:
    """The item's session at a phase whose artifact is missing: its stop is refused."""
    ctx = sandboxed_devbox(tmp_path, model, network="host", **sandbox)
    stopped.append(ctx)
    job = spawn_job(origin, item=ITEM, prompt="Work on issue 1.", model="")
    at_a_phase = job.payload.model_copy(update={"phase": "requirements-definition"})
    run_ok(ctx, replace(job, payload=at_a_phase))


def _assert_refused(gate: str) -> None:
    assert "Stop hook feedback" in gate
    assert "required artifact is missing (docs/specs/issue-1/" in gate


def _commit(tmp_path: Path, origin: Path, name: str, settings: dict[str, Any]) -> None:
    """`settings` as `.claude/<name>`, already on the branch the session is cloned at."""
    work = tmp_path / "pusher"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    (work / ".claude").mkdir()
    (work / ".claude" / name).write_text(json.dumps(settings))
    git("add", "-f", ".claude", cwd=work)
    git("commit", "-q", "-m", "settings", cwd=work)
    git("push", "-q", "origin", "HEAD:main", cwd=work)
