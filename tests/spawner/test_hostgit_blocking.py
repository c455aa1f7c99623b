"""A session's checkout holding what would block or flood host-side git — a fifo where git
reads a file, a link in its refs to a device — then its end and a relaunch through the real
spawn path (real tmux, git and bubblewrap, the stand-in harness): the end is still reported
(`session.exited`, `session.stopped`: what lets the App let the session's token lapse), the
checkout is refused and re-cloned, and host-side git never reads through the plant.

The session's part is played by the test, writing into the checkout what a session can write
there (tests/spawner/test_hostgit.py has the planted hooks and links)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.protocol import StopJob
from app.spawner.appclient import AppClient, ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.naming import item_slug
from app.spawner.session.leftovers import describe_session
from app.spawner.session.watchdog import Watchdog
from app.spawner.steps.netlaunch import session_over
from app.spawner.workspace.checkout import checkout_dir
from app.spawner.workspace.hostgit import HOST_MEMORY, HostGit
from app.store.tables import JobKind, WorkItemStatus
from tests.jobs_support import NAME, WI, deliver_job, events, run_ok, spawn_job
from tests.spawner_support import BRANCH, StandIn, bare_repository, git, on_branch

SHARED_API = {"lease_seconds": 1}  # how serve_api runs this module's App
EVENT_WAIT = 50.0  # generous: a blocked git would have held the event for its whole timeout


def _fifo_as_exclude(dot: Path) -> str:
    (dot / "info" / "exclude").unlink()
    os.mkfifo(dot / "info" / "exclude")
    return ".git/info/exclude is not a regular file (a fifo)"


def _fifo_included(dot: Path) -> str:
    os.mkfifo(dot / "p")
    git("config", "include.path", "p", cwd=dot.parent)
    return ".git/p is not a regular file (a fifo)"


PLANTS = [_fifo_as_exclude, _fifo_included]


def _in_time(act: Callable[[], Any]) -> Any:
    """`act()` run aside and waited for generously; an act still blocked fails the test."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["result"] = act()
        except BaseException as exc:  # reported below, in the test's thread
            done["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(EVENT_WAIT)
    assert not worker.is_alive(), "still blocked on what the session planted"
    if "error" in done:
        raise done["error"]
    return done.get("result")


def _started_then_planted(
    ctx: SpawnerContext, standin: StandIn, origin: Path, plant: Callable[[Path], str]
) -> tuple[Path, str]:
    run_ok(ctx, on_branch(spawn_job(origin)))
    standin.wait_start(WI)
    checkout = checkout_dir(ctx.workspace_root, WI)
    (checkout / "left-behind").write_text("x")
    return checkout, plant(checkout / ".git")


def _relaunched_afresh(
    ctx: SpawnerContext, standin: StandIn, origin: Path, checkout: Path, reason: str
) -> None:
    _in_time(lambda: run_ok(ctx, on_branch(deliver_job(origin, "carry on"))))
    recloned = events(ctx, "workspace.recloned")
    assert len(recloned) == 1 and reason in recloned[0]["reason"], recloned
    assert not (checkout / "left-behind").exists()  # a fresh clone
    assert (checkout / ".git" / "HEAD").read_text() == f"ref: refs/heads/{BRANCH}\n"
    standin.wait_start(WI, count=2)


@pytest.mark.parametrize("plant", PLANTS)
def test_a_fifo_in_git_does_not_keep_the_exit_from_being_reported(
    ctx: SpawnerContext, standin: StandIn, origin: Path, plant: Callable[[Path], str]
) -> None:
    checkout, reason = _started_then_planted(ctx, standin, origin, plant)
    ended: list[str] = []

    def over(item: str) -> None:
        session_over(ctx, item)
        ended.append(item)

    describe = describe_session(ctx.config, ctx.home, ctx.state_dir, ctx.env)
    dog = Watchdog(ctx.runner, ctx.registry, ctx.events.emit, ctx.locks, describe, ended=over)
    ctx.runner.kill(NAME, owner=WI)  # the session exits

    _in_time(dog.tick)

    (exited,) = events(ctx, "session.exited")
    assert exited["work_item_id"] == WI and ended == [WI]
    assert reason in exited["leftovers_unread"]
    assert "changed_files" not in exited  # not read, not guessed
    _relaunched_afresh(ctx, standin, origin, checkout, reason)


@pytest.mark.parametrize("plant", PLANTS)
def test_a_fifo_in_git_does_not_keep_a_stop_from_being_reported(
    ctx: SpawnerContext, standin: StandIn, origin: Path, plant: Callable[[Path], str]
) -> None:
    checkout, reason = _started_then_planted(ctx, standin, origin, plant)
    stop = StopJob(work_item_id=WI, repo="o/r", issue_number=7, reason="asked")

    result = _in_time(lambda: run_ok(ctx, ClaimedJob(3, stop, 60)))

    assert result == {"stopped": True, "found": True}
    (stopped,) = events(ctx, "session.stopped")
    assert stopped["reason"] == "asked" and reason in stopped["leftovers_unread"]
    assert ctx.runner.pane(NAME) is None
    _relaunched_afresh(ctx, standin, origin, checkout, reason)


def test_a_ref_linked_to_a_device_is_refused_before_git_reads_it(
    ctx: SpawnerContext, standin: StandIn, origin: Path
) -> None:
    def plant(dot: Path) -> str:
        ref = dot / "refs" / "heads" / BRANCH
        ref.unlink()
        ref.symlink_to("/dev/zero")
        return f".git/refs/heads/{BRANCH} is not a regular file (a symbolic link)"

    checkout, reason = _started_then_planted(ctx, standin, origin, plant)
    ctx.runner.kill(NAME, owner=WI)
    _relaunched_afresh(ctx, standin, origin, checkout, reason)
    assert not (checkout / ".git" / "refs" / "heads" / BRANCH).is_symlink()


@pytest.mark.parametrize("where", ["logs/HEAD", "objects/info/packs", "packed-refs"])
def test_anything_but_files_and_directories_in_git_is_refused(tmp_path: Path, where: str) -> None:
    work = tmp_path / "work"
    git("clone", "-q", str(bare_repository(tmp_path)), str(work), cwd=tmp_path)
    hostgit = HostGit({"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert hostgit.refusal(work) is None
    planted = work / ".git" / where
    planted.parent.mkdir(parents=True, exist_ok=True)
    planted.unlink(missing_ok=True)
    os.mkfifo(planted)
    assert hostgit.refusal(work) == f".git/{where} is not a regular file (a fifo)"
    planted.unlink()
    (work / ".git" / "hooks" / "linked").symlink_to("/dev/zero")  # hooks are never read
    assert hostgit.refusal(work) is None


def test_git_on_the_host_runs_with_its_address_space_capped(tmp_path: Path) -> None:
    """Whatever host git is still made to read cannot take the spawner's memory: what git
    starts (here an alias's shell) shows the limit it inherited."""
    work = tmp_path / "work"
    git("clone", "-q", str(bare_repository(tmp_path)), str(work), cwd=tmp_path)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    shown = HostGit(env, confined=False).run(work, "-c", "alias.limit=!ulimit -v", "limit")
    assert shown.stdout.strip() == str(HOST_MEMORY // 1024)
    control = subprocess.run(
        ["git", "-c", "alias.limit=!ulimit -v", "limit"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    assert control.stdout.strip() != str(HOST_MEMORY // 1024)


def test_git_blocked_by_what_refusal_cannot_see_is_a_refusal_not_an_error(tmp_path: Path) -> None:
    """An include naming a fifo in the work tree (outside `.git`, so the walk passes it):
    host git blocks on it until its timeout, and that is a reason to re-clone."""
    work = tmp_path / "work"
    git("clone", "-q", str(bare_repository(tmp_path)), str(work), cwd=tmp_path)
    os.mkfifo(work / "settings")
    with (work / ".git" / "config").open("a") as config:
        config.write(f"[include]\n\tpath = {work / 'settings'}\n")
    hostgit = HostGit({"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    refused = _in_time(lambda: hostgit.refusal(work))
    assert refused is not None and "did not answer" in refused and "timed out" in refused


@pytest.mark.parametrize("shared_api", ["sqlite"], indirect=True)
def test_the_app_lets_the_session_token_die_though_its_checkout_held_a_fifo(
    ctx: SpawnerContext, standin: StandIn, origin: Path, api: Any
) -> None:
    """The whole way: the App hands out the spawn with a session token, the spawner runs it,
    the session plants a fifo and exits, the watchdog's event reaches the App through the
    spawner's outbox, and the token the session held stops working."""
    token = api.token()
    app = api.spawner(token)
    app.register()
    item = api.work_item(number=7)
    api.queue(JobKind.SPAWN, "spawn:fifo", item, installation_id=1)
    offered = app.job()
    assert offered is not None
    session = api.spawner(offered["session_token"])
    client = AppClient(api.url, token)
    ctx = dataclasses.replace(ctx, events=SpawnerEvents(ctx.state_dir, client))
    result = run_ok(ctx, on_branch(spawn_job(origin, item=item)))
    assert app.result(offered["id"], **result).status_code == 200
    standin.wait_start(item)
    _fifo_as_exclude(checkout_dir(ctx.workspace_root, item) / ".git")
    assert session.comment(item, "still working").status_code == 200
    describe = describe_session(ctx.config, ctx.home, ctx.state_dir, ctx.env)
    dog = Watchdog(ctx.runner, ctx.registry, ctx.events.emit, ctx.locks, describe)
    ctx.runner.kill(item_slug(item), owner=item)

    _in_time(dog.tick)
    assert _in_time(ctx.events.flush)

    (exited,) = api.events("session.exited", item)
    assert "(a fifo)" in exited["leftovers_unread"]
    assert api.item(item).state == WorkItemStatus.EXITED
    assert session.comment(item, "after the end").status_code == 401
    client.close()
