"""How the App and the spawner keep their own secrets: a spawner that cannot confine
sessions refuses to start, with one line; its token leaves its environment; both processes
are non-dumpable; their state is private; with the sandbox off every launch says so."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.store.engines import make_engine
from tests.jobs_support import WI, events, make_config, run_ok, spawn_job
from tests.spawner_support import StandIn
from tests.support import free_port, start_the_loop, wait_for, wait_serving

ROOT = Path(__file__).resolve().parents[2]
NO_BWRAP = "/usr/local/sbin"  # a PATH without bwrap (python is run by its full path)


def the_loop(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {"HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=tmp_path,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_spawner_without_bubblewrap_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    out = the_loop(
        tmp_path,
        "spawner",
        PATH=NO_BWRAP,
        THE_LOOP_SPAWNER_TOKEN="tlsp_x",
        THE_LOOP_URL="http://127.0.0.1:9",
    )
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "bubblewrap (bwrap) is not installed" in out.stderr
    # Unsandboxed sessions run as the spawner's user: a root spawner is not offered that.
    assert ("routing.sandbox.mode: none" in out.stderr) is (os.geteuid() != 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="what a root spawner does")
def test_a_root_spawner_with_the_sandbox_off_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "cli-config.yaml").write_text("routing: {sandbox: {mode: none}}\n")
    up = the_loop(tmp_path, "up", PORT=str(free_port()), PATH=os.environ["PATH"])
    spawner = the_loop(
        tmp_path,
        "spawner",
        PATH=os.environ["PATH"],
        THE_LOOP_SPAWNER_TOKEN="tlsp_x",
        THE_LOOP_URL="http://127.0.0.1:9",
    )
    for out in (up, spawner):
        assert out.returncode == 2, out.stderr
        assert "runs as root: sessions never run as root" in out.stderr
        assert "cli-config.yaml" in out.stderr  # the file to edit


def test_up_keeps_its_state_private_and_its_token_out_of_the_spawners_environment(
    tmp_path: Path,
) -> None:
    out = the_loop(tmp_path, "up", PATH=NO_BWRAP, PORT=str(free_port()))
    assert out.returncode == 2 and "bubblewrap (bwrap) is not installed" in out.stderr
    port = free_port()
    log = tmp_path / "up.log"
    env = {"HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]}
    proc = start_the_loop(["up"], tmp_path, env | {"PORT": str(port)}, log)
    try:
        wait_serving(f"http://127.0.0.1:{port}", proc, log, timeout=60)
        state = tmp_path / ".local" / "state" / "the-loop"
        token = wait_for(lambda: (state / "spawner" / "local-spawner.token").exists(), timeout=30)
        assert token
        child = wait_for(lambda: _spawner_pid(proc.pid), timeout=30)
        environ = Path(f"/proc/{child}/environ").read_bytes()
        assert b"THE_LOOP_SPAWNER_TOKEN" not in environ  # it reads the private file instead
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert stat.S_IMODE((state / "spawner").stat().st_mode) == 0o700
        assert stat.S_IMODE((state / "the-loop.db").stat().st_mode) == 0o600
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    assert "sessions run in a bubblewrap sandbox" in log.read_text()


def _spawner_pid(parent: int) -> int | None:
    """The `the-loop spawner` process `up` started."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
        except OSError:
            continue
        if int(ppid) == parent and b"spawner" in cmdline:
            return int(pid)
    return None


def test_the_app_and_the_spawner_make_themselves_non_dumpable() -> None:
    script = (
        "from app.spawner.confine.hardening import dumpable, undumpable\n"
        "print(dumpable(), undumpable(), dumpable())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["True", "True", "False"]


def test_a_new_sqlite_database_and_its_directory_are_private(tmp_path: Path) -> None:
    path = tmp_path / "state" / "the-loop.db"
    engine = make_engine(f"sqlite:///{path}")
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x)")
    engine.dispose()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="what a root spawner does")
def test_with_the_sandbox_off_a_root_spawner_launches_nothing(
    ctx: SpawnerContext, standin: StandIn, origin: Path, tmp_path: Path
) -> None:
    """An unconfined session runs as the spawner's user: as root, the launch is refused
    (the job fails saying why) and no session starts."""
    ctx.config = make_config(standin, tmp_path, sandbox={"mode": "none"})
    ok, _, error = run_job(ctx, spawn_job(origin))
    assert not ok and error is not None and "sessions never run as root" in error
    assert events(ctx, "session.spawned") == [] and standin.starts(WI) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="a root spawner refuses it (the test above)")
def test_with_the_sandbox_off_every_launch_warns_and_trusts_the_real_home(
    ctx: SpawnerContext, standin: StandIn, origin: Path, home: Path, tmp_path: Path
) -> None:
    ctx.config = make_config(standin, tmp_path, sandbox={"mode": "none"})
    run_ok(ctx, spawn_job(origin))
    start = standin.wait_start(WI)
    assert start["env"]["HOME"] == str(home)
    (warned,) = events(ctx, "session.unsandboxed")
    assert warned["level"] == "warning" and "unconfined" in warned["message"]
    assert events(ctx, "session.spawned")[0]["sandbox"] == "none"
    assert (home / ".claude.json").exists()
