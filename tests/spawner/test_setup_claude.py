"""The repository's set-up before a real session: the real `claude`, launched by the
spawner's spawn path in bubblewrap with its closed network and driven by the scripted model.
The repository's devcontainer file (with comments) writes a marker in `postCreateCommand`;
what the model is shown when its first turn runs `cat marker` is the assertion — the
set-up had finished before the agent's first request."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.protocol import StopJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from tests.claude_support import GENEROUS, sandboxed_devbox
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything, bash, tool_result_for
from tests.fakes.model_script import contains
from tests.jobs_support import events, run_ok, spawn_job
from tests.spawner_support import git

pytestmark = pytest.mark.claude
ITEM = "github:o/r#1"
DEVCONTAINER = """{
  // what a dev container would run once it is made
  "onCreateCommand": ["sh", "-c", "mkdir -p .venv && echo made > .venv/made"],
  "postCreateCommand": "echo set-up-ran-$(cat .venv/made) > marker",
}
"""


def origin(tmp_path: Path) -> Path:
    work = tmp_path / "src"
    (work / ".devcontainer").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / ".devcontainer" / "devcontainer.json").write_text(DEVCONTAINER)
    (work / ".gitignore").write_text(".venv/\nmarker\n")
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    git("clone", "-q", "--bare", str(work), str(tmp_path / "origin.git"), cwd=tmp_path)
    return tmp_path / "origin.git"


def test_the_marker_is_there_at_the_agents_first_request(
    tmp_path: Path, stopped: list[SpawnerContext]
) -> None:
    script = [
        Step(contains("Look at the checkout"), Reply("Looking.", (bash("cat marker"),))),
        Step(tool_result_for("Bash", "set-up-ran"), Reply("The set-up ran."), name="shown"),
        *[Step(anything, Reply("Stopping here.")) for _ in range(6)],
    ]
    with FakeAnthropic(script) as model:
        ctx = sandboxed_devbox(tmp_path, model)
        stopped.append(ctx)
        run_ok(
            ctx, spawn_job(origin(tmp_path), item=ITEM, prompt="Look at the checkout.", model="")
        )
        shown = model.wait_for_step(1, timeout=GENEROUS).turn

    (result,) = [r for r in shown.results if r.name == "Bash"]
    assert "set-up-ran-made" in result.content  # onCreate then postCreate, in order
    (finished,) = events(ctx, "session.setup_finished")
    (spawned,) = events(ctx, "session.spawned")
    assert finished["warm"] is False and spawned["network"] == "gateways"
    run_ok(ctx, ClaimedJob(2, StopJob(work_item_id=ITEM, repo="o/r", issue_number=1), 60))
