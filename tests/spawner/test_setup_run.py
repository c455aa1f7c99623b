"""The repository's set-up on the spawner's spawn path (real git, bubblewrap, tmux, the
closed network; the harness a stand-in): it runs confined before the harness starts, a
failing one launches nothing and says why, and a second checkout at the same lock files
gets what the first set-up produced without running it again."""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.config.operator_config import parse_config
from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.spawner.naming import item_slug
from app.spawner.workspace.prepared import store_of
from tests.jobs_support import events, run_ok, spawn_job
from tests.spawner_support import StandIn, git

DEVCONTAINER = """// the repository's dev container
{
  "image": "mcr.microsoft.com/devcontainers/python:3",
  /* made once per container */
  "onCreateCommand": ["sh", "-c", "mkdir -p .venv/bin && od -An -N8 -tx8 /dev/urandom > .venv/made && printf '#!%%s/.venv/bin/python\\n' \\"$PWD\\" > .venv/bin/tool && ln -s /etc/hostname .venv/bin/link"],
  "postCreateCommand": {
    "marker": "echo ready > marker",
    "probe": "test -e %(state)s/events.jsonl && echo state-visible > probe || echo $HTTPS_PROXY > probe",
  },
}
"""


def repository(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    """A bare repository holding `files` on `main`, ignoring `.venv`."""
    work = tmp_path / f"{name}-src"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    for path, text in {".gitignore": ".venv/\n", **files}.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    bare = tmp_path / name
    git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare


def devcontainer(spawner: SpawnerContext) -> str:
    return DEVCONTAINER % {"state": spawner.state_dir}


def item(number: int) -> str:
    return f"github:o/r#{number}"


def test_the_setup_runs_confined_before_the_harness_and_warms_the_next_checkout(
    tmp_path: Path,
    ctx: SpawnerContext,
    standin: StandIn,
) -> None:
    files = {".devcontainer/devcontainer.json": devcontainer(ctx), "requirements.txt": "six\n"}
    bare = repository(tmp_path, "one.git", files)

    run_ok(ctx, spawn_job(bare, item=item(1)))
    first = ctx.workspace_root / item_slug(item(1))
    standin.wait_start(item(1))

    assert (first / "marker").read_text() == "ready\n"
    # Confined: the spawner's state is not there; its network is the closed one's proxy.
    assert (first / "probe").read_text().startswith("http://127.0.0.1:")
    (started,) = events(ctx, "session.setup_started")
    assert started["source"] == ".devcontainer/devcontainer.json"
    assert started["commands"][1] == "echo ready > marker"
    (finished,) = events(ctx, "session.setup_finished")
    assert finished["warm"] is False and finished["exit_status"] == 0 and finished["kept"]
    spawned = events(ctx, "session.spawned")
    assert [e["id"] for e in events(ctx, "session.setup_finished")]
    lines = [json.loads(x) for x in ctx.events.path.read_text().splitlines()]
    order = [e["event"] for e in lines if e["work_item_id"] == item(1)]
    assert order.index("session.setup_finished") < order.index("session.spawned")
    assert spawned

    # Another item on the same repository at the same lock files: warm, the same venv.
    run_ok(ctx, spawn_job(bare, item=item(2)))
    second = ctx.workspace_root / item_slug(item(2))
    warm = events(ctx, "session.setup_finished")[-1]
    assert warm["warm"] is True and warm["work_item_id"] == item(2)
    assert (second / ".venv" / "made").read_text() == (first / ".venv" / "made").read_text()
    assert (second / "marker").read_text() == "ready\n"
    assert not (second / ".venv").samefile(first / ".venv")  # a copy of its own
    # A script naming the first checkout names the second; a link stays a link.
    assert (second / ".venv/bin/tool").read_text() == f"#!{second}/.venv/bin/python\n"
    assert (first / ".venv/bin/tool").read_text() == f"#!{first}/.venv/bin/python\n"
    assert os.readlink(second / ".venv/bin/link") == "/etc/hostname"
    assert len(events(ctx, "session.setup_started")) == 2

    # A launch of the same item again on its set-up checkout runs nothing.
    (second / "marker").write_text("the session's own\n")
    run_job(ctx, spawn_job(bare, item=item(2)))
    assert len(events(ctx, "session.setup_started")) == 2


def test_another_lock_file_is_a_cold_setup(
    tmp_path: Path,
    ctx: SpawnerContext,
) -> None:
    base = {".devcontainer/devcontainer.json": devcontainer(ctx)}
    run_ok(ctx, spawn_job(repository(tmp_path, "a.git", {**base, "uv.lock": "a"}), item=item(1)))
    run_ok(ctx, spawn_job(repository(tmp_path, "b.git", {**base, "uv.lock": "b"}), item=item(2)))

    assert [e["warm"] for e in events(ctx, "session.setup_finished")] == [False, False]
    made = [(ctx.workspace_root / item_slug(item(n)) / ".venv/made").read_text() for n in (1, 2)]
    assert made[0] != made[1]
    assert len(list(store_of(ctx.state_dir, "o/r").iterdir())) == 2


def test_a_failing_setup_launches_nothing_and_says_what_failed(
    tmp_path: Path,
    ctx: SpawnerContext,
    standin: StandIn,
) -> None:
    failing = '{"onCreateCommand": "echo installing; echo no such package >&2; exit 3",'
    failing += ' "postCreateCommand": "echo ready > marker"}'
    bare = repository(tmp_path, "bad.git", {".devcontainer/devcontainer.json": failing})

    ok, _, error = run_job(ctx, spawn_job(bare, item=item(1)))

    assert not ok and error == "the repository's set-up failed: onCreateCommand exited 3"
    (failed,) = events(ctx, "session.setup_failed")
    assert failed["exit_status"] == 3 and failed["step"] == "onCreateCommand"
    assert failed["command"].startswith("echo installing;")
    assert failed["tail"] == "installing\nno such package\n"
    assert events(ctx, "session.spawned") == [] and standin.starts(item(1)) == []
    assert not (ctx.workspace_root / item_slug(item(1)) / "marker").exists()


def test_bad_json_fails_naming_the_file(
    tmp_path: Path,
    ctx: SpawnerContext,
) -> None:
    bare = repository(tmp_path, "j.git", {".devcontainer/devcontainer.json": '{"a": '})
    ok, _, error = run_job(ctx, spawn_job(bare, item=item(1)))
    assert not ok and error is not None
    assert ".devcontainer/devcontainer.json is not valid JSON" in error


def test_a_setup_script_the_operators_command_and_off(
    tmp_path: Path,
    ctx: SpawnerContext,
) -> None:
    bare = repository(tmp_path, "s.git", {".the-loop/setup": "#!/bin/sh\necho script > marker\n"})
    (tmp_path / "s.git-src" / ".the-loop" / "setup").chmod(0o755)
    src = tmp_path / "s.git-src"
    git("add", "-A", cwd=src)
    git("commit", "-q", "-m", "executable", cwd=src)
    git("push", "-q", str(bare), "main", cwd=src)
    run_ok(ctx, spawn_job(bare, item=item(1)))
    assert (ctx.workspace_root / item_slug(item(1)) / "marker").read_text() == "script\n"

    raw = ctx.config.model_dump(by_alias=True)
    raw["routing"]["setup"] = "echo operator > marker"
    ctx.config = parse_config(raw, "test.yaml")
    run_ok(ctx, spawn_job(bare, item=item(2)))
    assert (ctx.workspace_root / item_slug(item(2)) / "marker").read_text() == "operator\n"

    raw["routing"]["setup"] = False
    ctx.config = parse_config(raw, "test.yaml")
    run_ok(ctx, spawn_job(bare, item=item(3)))
    assert not (ctx.workspace_root / item_slug(item(3)) / "marker").exists()


def test_a_setup_past_its_time_is_killed_and_fails(
    tmp_path: Path,
    ctx: SpawnerContext,
) -> None:
    raw = ctx.config.model_dump(by_alias=True)
    raw["routing"]["setup"] = {"timeoutSeconds": 2}
    ctx.config = parse_config(raw, "test.yaml")
    slow = '{"postCreateCommand": "echo started; sleep 120; touch marker"}'
    bare = repository(tmp_path, "slow.git", {".devcontainer/devcontainer.json": slow})

    ok, _, error = run_job(ctx, spawn_job(bare, item=item(1)))

    assert not ok and error == "the repository's set-up failed: postCreateCommand timed out"
    (failed,) = events(ctx, "session.setup_failed")
    assert failed["timed_out"] is True and failed["exit_status"] is None
    assert failed["tail"] == "started\n" and failed["seconds"] < 120
    assert not (ctx.workspace_root / item_slug(item(1)) / "marker").exists()


def test_a_devcontainer_file_that_is_a_link_is_not_followed(
    tmp_path: Path,
    ctx: SpawnerContext,
) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"postCreateCommand": "touch marker"}')
    work = tmp_path / "link-src"
    (work / ".devcontainer").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / ".devcontainer" / "devcontainer.json").symlink_to(elsewhere)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "a link", cwd=work)
    git("clone", "-q", "--bare", str(work), str(tmp_path / "link.git"), cwd=tmp_path)

    run_ok(ctx, spawn_job(tmp_path / "link.git", item=item(1)))

    assert events(ctx, "session.setup_started") == []
    assert not (ctx.workspace_root / item_slug(item(1)) / "marker").exists()
