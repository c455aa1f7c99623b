"""A hostile session against the host, through the real spawn path (real tmux, git and
bubblewrap, a stand-in harness): it leaves a set-uid copy of Python and a world-writable
directory in its checkout and home, reads a secret under `/etc` and fills the disk. The
host sees no set-uid bit and no world-writable directory once the session ended; a session
of a root spawner runs as an unprivileged user who owns what it wrote; the workspace root is
its owner's alone; a session past `routing.sandbox.limits.disk` is stopped and its end says
`limit: disk`."""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.protocol import StopJob
from app.spawner.appclient import ClaimedJob
from app.spawner.confine.isolation import unreadable_in
from app.spawner.confine.sessionhome import home_for
from app.spawner.confine.sessionuser import SESSION_USER
from app.spawner.context import SpawnerContext
from app.spawner.naming import item_slug
from app.spawner.session.watchdog import Watchdog
from app.spawner.steps.diskwatch import look_once
from app.spawner.steps.netlaunch import session_over
from app.spawner.workspace.checkout import checkout_dir
from app.workitems.tell.endings import LIMIT_WORDS
from tests.jobs_support import WI, events, make_config, run_ok, spawn_job
from tests.spawner_support import StandIn
from tests.support import wait_for

WAIT = 120.0  # generous: a loaded machine starts sandboxes slowly
SECRET = Path("/etc/the-loop-test-secret")
SECRET_TEXT = "root-only-secret-of-the-devbox"

HOSTILE = r"""#!{python}
import json, os, shutil, sys, time, urllib.parse
item = os.environ["THE_LOOP_WORK_ITEM_ID"]
out = os.path.join({records!r}, urllib.parse.quote(item, safe=""))
mode = open(os.path.join(out, "mode")).read().strip()
def seen(**facts):
    with open(os.path.join(out, ".tmp"), "w") as fh:
        json.dump(facts, fh)
    os.replace(os.path.join(out, ".tmp"), os.path.join(out, "seen.json"))
if mode == "setuid":
    for where in (os.getcwd(), os.environ["HOME"]):
        shutil.copy(os.path.realpath(sys.executable), os.path.join(where, "x"))
        os.chmod(os.path.join(where, "x"), 0o4755)
        os.mkdir(os.path.join(where, "d"))
        os.chmod(os.path.join(where, "d"), 0o777)
    try:
        secret = open("/etc/the-loop-test-secret").read()
    except OSError as exc:
        secret = type(exc).__name__
    seen(uid=os.getuid(), euid=os.geteuid(), gid=os.getgid(), secret=secret,
         x_mode=os.stat("x").st_mode)
elif mode == "disk":
    with open("filler", "wb") as fh:
        for n in range(50):
            fh.write(b"x" * (1 << 20))
            fh.flush()
            os.fsync(fh.fileno())
            seen(written=(n + 1) << 20)
            time.sleep(0.05)
time.sleep(600)
"""


@pytest.fixture
def intruder(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path / "hostile", HOSTILE)


@pytest.fixture
def confined(ctx: SpawnerContext, intruder: StandIn, tmp_path: Path) -> Iterator[SpawnerContext]:
    """The test's context running the hostile harness, its disk bound 20 MiB; the harness
    shows no input box, so the launch does not wait for one."""
    sandbox = {**intruder.sandbox, "limits": {"disk": "20MiB"}}
    config = make_config(intruder, tmp_path, sandbox=sandbox)
    made = dataclasses.replace(ctx, config=config, ready_timeout=0.0)
    yield made
    made.runner.kill_server()
    if made.limiter is not None:
        made.limiter.release()


@pytest.fixture
def secret() -> Iterator[Path]:
    """A file under /etc only root may read (made by the test when the host allows it)."""
    try:
        SECRET.write_text(SECRET_TEXT)
        SECRET.chmod(0o600)
    except OSError:
        pytest.skip("this test needs to write a file under /etc (it runs as root in CI)")
    yield SECRET
    SECRET.unlink(missing_ok=True)


def _mode(standin: StandIn, item: str, mode: str) -> None:
    (standin.folder(item) / "mode").write_text(mode)


def _seen(standin: StandIn, item: str) -> dict[str, Any] | None:
    path = standin.folder(item) / "seen.json"
    return json.loads(path.read_text()) if path.exists() else None


def _stop(ctx: SpawnerContext, item: str) -> dict[str, Any]:
    repo, _, number = item.removeprefix("github:").rpartition("#")
    stop = StopJob(work_item_id=item, repo=repo, issue_number=int(number), reason="asked")
    return run_ok(ctx, ClaimedJob(9, stop, 60))


def _unsafe(root: Path) -> list[str]:
    """Entries under `root` with a set-uid/set-gid bit, or directories writable by others."""
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if mode & (stat.S_ISUID | stat.S_ISGID) or (stat.S_ISDIR(mode) and mode & stat.S_IWOTH):
                found.append(os.path.join(folder, name))
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="the session user is made by a root spawner")
def test_a_session_of_a_root_spawner_runs_unprivileged_and_leaves_nothing_set_uid(
    confined: SpawnerContext, intruder: StandIn, origin: Path, tmp_path: Path, secret: Path
) -> None:
    ctx = confined
    _mode(intruder, WI, "setuid")
    run_ok(ctx, spawn_job(origin))
    seen = wait_for(lambda: _seen(intruder, WI), timeout=WAIT)
    checkout = checkout_dir(ctx.workspace_root, WI)
    home = home_for(ctx.state_dir, item_slug(WI))
    user = pwd.getpwnam(SESSION_USER)
    assert seen["uid"] == seen["euid"] == user.pw_uid != 0
    assert seen["secret"] != SECRET_TEXT  # /etc shows only what any user may read
    assert seen["x_mode"] & stat.S_ISUID  # the session did make its set-uid file
    assert os.lstat(checkout / "x").st_uid == user.pw_uid  # owned by the session's user
    assert stat.S_IMODE(os.lstat(ctx.workspace_root).st_mode) == 0o700
    _stop(ctx, WI)  # its end: before any host step, the tree is made safe
    assert (checkout / "x").exists() and (home / "x").exists()
    assert _unsafe(checkout) == [] and _unsafe(home) == []


def test_a_session_past_its_disk_bound_is_stopped_and_its_end_says_disk(
    confined: SpawnerContext, intruder: StandIn, origin: Path
) -> None:
    ctx = confined
    _mode(intruder, WI, "disk")
    run_ok(ctx, spawn_job(origin))
    watchdog = Watchdog(
        ctx.runner,
        ctx.registry,
        ctx.events.emit,
        ctx.locks,
        None,
        ended=lambda item: session_over(ctx, item),
    )

    def ended() -> list[dict[str, Any]]:
        look_once(ctx)
        watchdog.tick()
        return events(ctx, "session.exited")

    (end,) = wait_for(ended, timeout=WAIT)
    assert end["limit"] == "disk" and end["disk_used"] > 20 << 20
    (said,) = events(ctx, "session.disk_limit")
    assert said["level"] == "warning"
    assert "disk" in LIMIT_WORDS


def test_what_only_root_may_read_under_etc_is_covered(secret: Path) -> None:
    covered = {s.path for s in unreadable_in(Path("/etc"))}
    assert secret in covered
    assert Path("/etc/passwd") not in covered
