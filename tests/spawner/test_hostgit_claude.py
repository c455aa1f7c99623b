"""The real `claude`, in its sandbox, driven by the scripted model: its Bash tool plants a
`post-checkout` and `post-index-change` hook and a `core.fsmonitor` in its checkout and
leaves it on another branch, then the session ends. A follow-up relaunches it through the
spawner's real path: the hooks never run on the host, and the relaunched session hears the
follow-up. The same planted checkout under a plain `git switch` (the control) fires them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from app.spawner.context import SpawnerContext
from app.spawner.naming import item_slug
from app.spawner.workspace.checkout import checkout_dir
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, bash, contains, tool_result_for
from tests.jobs_support import deliver_job, events, run_ok, spawn_job
from tests.spawner_support import BRANCH, bare_repository, on_branch
from tests.support import wait_for

pytestmark = pytest.mark.claude
ITEM = "github:o/r#1"


def plant_command(canaries: Path) -> str:
    """What the session's Bash tool runs in its checkout (its working directory)."""
    # Inside its own sandbox the canary directory does not exist: the hook fails quietly
    # there, and exits 0 so the session's own `git switch` succeeds.
    hook = f"#!/bin/sh\\n{{ echo ran >> {canaries}/\\$(basename \\$0); }} 2>/dev/null\\nexit 0\\n"
    return (
        f'printf "{hook}" > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout'
        " && cp .git/hooks/post-checkout .git/hooks/post-index-change"
        " && cp .git/hooks/post-checkout .git/fsmonitor"
        ' && git config core.fsmonitor "$PWD/.git/fsmonitor"'
        " && git switch -q -c elsewhere main && echo planted on $(git branch --show-current)"
    )


def test_hooks_the_real_session_planted_never_run_on_its_relaunch(
    tmp_path: Path, stopped: list[SpawnerContext]
) -> None:
    canaries = tmp_path / "canaries"  # a host directory: not in the session's sandbox
    canaries.mkdir()
    script = [
        Step(contains("Set a trap"), Reply("Planting.", (bash(plant_command(canaries)),))),
        Step(tool_result_for("Bash", "planted on elsewhere"), Reply("Trap set."), name="set"),
        Step(contains("carry on with the issue"), Reply("Carrying on."), name="relaunched"),
    ]
    origin = bare_repository(tmp_path)
    with FakeAnthropic(script) as model:
        ctx = sandboxed_devbox(tmp_path, model)
        stopped.append(ctx)
        job = spawn_job(origin, item=ITEM, prompt="Set a trap.", model="", effort="")
        run_ok(ctx, on_branch(job))
        model.wait_for_step(1, timeout=GENEROUS)
        pane = item_slug(ITEM)
        wait_for(lambda: "Trap set." in ctx.runner.capture(pane), timeout=GENEROUS)
        ctx.runner.kill(pane, owner=ITEM)  # the session ends
        checkout = checkout_dir(ctx.workspace_root, ITEM)
        assert (checkout / ".git" / "HEAD").read_text() == "ref: refs/heads/elsewhere\n"
        control = tmp_path / "control"
        shutil.copytree(checkout, control, symlinks=True)

        run_ok(ctx, on_branch(deliver_job(origin, "Please carry on with the issue.", item=ITEM)))
        seen = model.wait_for_step(2, timeout=GENEROUS)
        model.assert_script_done()

    assert sorted(p.name for p in canaries.iterdir()) == []
    assert "carry on with the issue" in seen.turn.text
    assert (checkout / ".git" / "HEAD").read_text() == f"ref: refs/heads/{BRANCH}\n"
    assert events(ctx, "workspace.branch")[-1]["how"] == "switched"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", "-C", str(control), "switch", "-q", BRANCH], env=env, check=True)
    fired = {p.name for p in canaries.iterdir()}
    assert {"post-checkout", "post-index-change", "fsmonitor"} <= fired
