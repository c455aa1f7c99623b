"""A hostile session against its limits, through the real spawn path (real tmux, bubblewrap
and cgroups, a stand-in harness that fork-bombs or allocates): it stays within
`routing.sandbox.limits`, the spawner keeps answering, the end says which limit the session
met, and its cgroup is gone.

The limits are low (64 processes, 256 MiB) and the hostile harness bounds itself too (300
forks at most, each child a `sleep`), so a broken mechanism costs the machine little; the
context's teardown kills whatever is left in the session's cgroups."""

from __future__ import annotations

import dataclasses
import json
import os
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.protocol import StopJob
from app.spawner.appclient import ClaimedJob
from app.spawner.confine.cgroups import SessionLimiter
from app.spawner.confine.limits import HostOffer, Mechanism
from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.spawner.naming import item_slug
from app.spawner.registry import SessionState
from app.spawner.session.watchdog import Watchdog
from app.spawner.steps.netlaunch import session_over
from app.spawner.steps.sessionlimits import clean_stale_limits, limiter_of
from tests.jobs_support import NAME, WI, events, make_config, run_ok, spawn_job
from tests.spawner_support import SANDBOX_MODES, StandIn
from tests.support import wait_for

PROCESSES, MEMORY = 64, 256 << 20
LIMITS = {"memory": "256MiB", "processes": PROCESSES}
CALM = "github:o/r#8"
WAIT = 120.0  # generous: a loaded machine starts sandboxes slowly
HOG = 1 << 30  # what the memory hog tries to hold, in 16 MiB pieces

# The hostile harness: what it does is in `mode` in its work item's folder; what it saw,
# in `seen.json` there.
HOSTILE = r"""#!{python}
import json, os, sys, time, urllib.parse
item = os.environ["THE_LOOP_WORK_ITEM_ID"]
out = os.path.join({records!r}, urllib.parse.quote(item, safe=""))
mode = open(os.path.join(out, "mode")).read().strip()
def seen(**facts):
    with open(os.path.join(out, ".tmp"), "w") as fh:
        json.dump(facts, fh)
    os.replace(os.path.join(out, ".tmp"), os.path.join(out, "seen.json"))
if mode == "forks":
    made = refused = 0
    for _ in range(300):  # bounded even where nothing else bounds it
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            continue
        if pid == 0:
            try:
                os.execv("/bin/sleep", ["sleep", "600"])
            finally:
                os._exit(0)
        made += 1
    seen(made=made, refused=refused)
elif mode == "memory":
    held = []
    try:
        while len(held) * (16 << 20) < (1 << 30):
            held.append(b"x" * (16 << 20))  # written, so really resident
            seen(held=len(held) * (16 << 20))
    except MemoryError:
        seen(held=len(held) * (16 << 20), refused=True)
    else:
        seen(held=len(held) * (16 << 20), survived=True)
else:
    seen(calm=True, cgroup=open("/proc/self/cgroup").read())
time.sleep(600)
"""


@pytest.fixture
def hostile(tmp_path: Path) -> StandIn:
    return StandIn(tmp_path / "hostile", HOSTILE)


@pytest.fixture
def bounded(ctx: SpawnerContext, hostile: StandIn, tmp_path: Path) -> Iterator[SpawnerContext]:
    """The test's context with low limits, running the hostile harness. That harness never
    shows an input box, so a launch does not wait for one (`ready_timeout` 0: one look, and
    the first message stays pending, which no test here reads); every test waits instead on
    what the harness itself records."""
    sandbox = {**hostile.sandbox, "limits": LIMITS}
    config = make_config(hostile, tmp_path, sandbox=sandbox)
    made = dataclasses.replace(ctx, config=config, ready_timeout=0.0)
    yield made
    if made.limiter is not None:  # whatever the session left, killed; its cgroups gone
        made.limiter.release()


def _mode(standin: StandIn, item: str, mode: str) -> None:
    standin.folder(item).mkdir(parents=True, exist_ok=True)
    (standin.folder(item) / "mode").write_text(mode)


def _seen(standin: StandIn, item: str) -> dict[str, Any] | None:
    path = standin.folder(item) / "seen.json"
    return json.loads(path.read_text()) if path.exists() else None


def _done(seen: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the memory hog saw, once it knows how its allocation ended."""
    return seen if seen is not None and ("refused" in seen or "survived" in seen) else None


def _cgroups(ctx: SpawnerContext, item: str) -> dict[str, Path]:
    return {key: parent / item_slug(item) for key, parent in limiter_of(ctx).plan.parents.items()}


def _needs_cgroup(ctx: SpawnerContext) -> None:
    if limiter_of(ctx).plan.mechanism not in (Mechanism.CGROUP1, Mechanism.CGROUP2):
        pytest.skip("this machine offers the spawner no writable cgroup (rlimit tests run)")


def _stop(ctx: SpawnerContext, item: str) -> dict[str, Any]:
    repo, _, number = item.removeprefix("github:").rpartition("#")
    stop = StopJob(work_item_id=item, repo=repo, issue_number=int(number), reason="asked")
    return run_ok(ctx, ClaimedJob(9, stop, 60))


@pytest.mark.parametrize("mode", SANDBOX_MODES)
def test_a_fork_bomb_stays_under_the_process_limit_and_its_cgroup_goes_at_its_stop(
    bounded: SpawnerContext, hostile: StandIn, origin: Path, tmp_path: Path, mode: str
) -> None:
    sandbox = {**hostile.sandbox, "mode": mode, "limits": LIMITS}
    ctx = dataclasses.replace(bounded, config=make_config(hostile, tmp_path, sandbox=sandbox))
    bounded.limiter = limiter_of(ctx)  # released by the fixture
    _needs_cgroup(ctx)
    _mode(hostile, WI, "forks")
    _mode(hostile, CALM, "calm")
    run_ok(ctx, spawn_job(origin))
    pids = _cgroups(ctx, WI)["" if "" in _cgroups(ctx, WI) else "pids"]
    counts: list[int] = []

    def bombed() -> dict[str, Any] | None:
        counts.append(int((pids / "pids.current").read_text()))
        return _seen(hostile, WI)

    forks = wait_for(bombed, timeout=WAIT)
    peak = max(counts)
    assert forks is not None and forks["refused"] > 0 and forks["made"] < PROCESSES
    if (pids / "pids.peak").exists():  # the kernel's own high-water mark
        peak = int((pids / "pids.peak").read_text())
    assert 0 < peak <= PROCESSES

    run_ok(ctx, spawn_job(origin, item=CALM))  # the spawner still launches
    assert wait_for(lambda: _seen(hostile, CALM), timeout=WAIT)["calm"] is True

    assert _stop(ctx, WI) == {"stopped": True, "found": True}
    (stopped,) = events(ctx, "session.stopped")
    assert stopped["limit"] == "processes" and stopped["forks_refused"] > 0
    assert all(not path.exists() for path in _cgroups(ctx, WI).values())
    assert ctx.runner.pane(NAME) is None
    assert all(path.exists() for path in _cgroups(ctx, CALM).values())  # the other stays


def test_the_harness_runs_in_its_own_cgroups_with_the_cpu_share_asked_for(
    bounded: SpawnerContext, hostile: StandIn, origin: Path, tmp_path: Path
) -> None:
    limits = {"memory": "256MiB", "processes": PROCESSES, "cpu": 0.5}
    sandbox = {**hostile.sandbox, "limits": limits}
    ctx = dataclasses.replace(bounded, config=make_config(hostile, tmp_path, sandbox=sandbox))
    _needs_cgroup(ctx)
    bounded.limiter = ctx.limiter  # released by the fixture
    _mode(hostile, WI, "calm")
    run_ok(ctx, spawn_job(origin))
    seen = wait_for(lambda: _seen(hostile, WI), timeout=WAIT)
    inside = {line.split(":", 2)[1]: line.split(":", 2)[2] for line in seen["cgroup"].split()}
    dirs = _cgroups(ctx, WI)
    for key, directory in dirs.items():  # the path the kernel shows ends in the session's own
        assert directory.as_posix().endswith(inside.get(key, inside.get("cpu,cpuacct", "?")))
    if "cpu" in dirs:
        assert (dirs["cpu"] / "cpu.cfs_quota_us").read_text().strip() == "50000"
    elif "" in dirs:
        assert (dirs[""] / "cpu.max").read_text().split() == ["50000", "100000"]
    else:
        assert [name for name, _ in limiter_of(ctx).plan.unenforced] == ["cpu"]
    assert _stop(ctx, WI) == {"stopped": True, "found": True}
    assert all(not path.exists() for path in dirs.values())


def test_a_memory_hog_is_killed_alone_and_its_end_says_so(
    bounded: SpawnerContext, hostile: StandIn, origin: Path
) -> None:
    ctx = bounded
    _needs_cgroup(ctx)
    _mode(hostile, WI, "memory")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run_ok(ctx, spawn_job(origin))
    over = Watchdog(
        ctx.runner,
        ctx.registry,
        ctx.events.emit,
        ctx.locks,
        None,
        ended=lambda i: session_over(ctx, i),
    )

    def exited() -> list[dict[str, Any]]:
        over.tick()
        return events(ctx, "session.exited")

    (ended,) = wait_for(exited, timeout=WAIT)
    assert ended["limit"] == "memory" and ended["oom_kills"] >= 1
    seen = _seen(hostile, WI)
    assert seen is not None and "survived" not in seen and seen["held"] < HOG
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    assert grew < 64 << 20  # the spawner (this process) held none of it
    assert all(not path.exists() for path in _cgroups(ctx, WI).values())


def test_without_a_cgroup_the_sandbox_bounds_each_process_and_warns_of_the_rest(
    bounded: SpawnerContext, hostile: StandIn, origin: Path
) -> None:
    ctx = bounded
    root = os.geteuid() == 0
    limits = ctx.config.routing.sandbox.limits
    ctx.limiter = SessionLimiter.for_host(HostOffer(root=root), limits, sandboxed=True)
    assert ctx.limiter.plan.mechanism is Mechanism.RLIMIT
    _mode(hostile, WI, "memory")
    _mode(hostile, CALM, "forks")
    run_ok(ctx, spawn_job(origin))
    seen = wait_for(lambda: _done(_seen(hostile, WI)), timeout=WAIT)
    assert seen.get("refused") is True and seen["held"] < MEMORY  # RLIMIT_AS, per process
    run_ok(ctx, spawn_job(origin, item=CALM))
    forks = wait_for(lambda: _seen(hostile, CALM), timeout=WAIT)
    warned = events(ctx, "session.unlimited")
    if root:  # the kernel never applies RLIMIT_NPROC to root: every launch says so
        assert [w["unenforced"] for w in warned] == [["processes"], ["processes"]]
        assert all(w["level"] == "warning" and "root" in w["message"] for w in warned)
    else:  # counted in the session's own user namespace
        assert warned == [] and forks["refused"] > 0 and forks["made"] < PROCESSES
    assert _stop(ctx, CALM) == {"stopped": True, "found": True}


def test_a_restarted_spawner_removes_the_cgroups_of_sessions_no_longer_live(
    bounded: SpawnerContext, hostile: StandIn, origin: Path
) -> None:
    ctx = bounded
    _needs_cgroup(ctx)
    for item in (WI, CALM):
        _mode(hostile, item, "calm")
        run_ok(ctx, spawn_job(origin, item=item))
        wait_for(lambda item=item: _seen(hostile, item), timeout=WAIT)
    # The spawner went away between the registry's word and the cgroup's removal.
    ctx.registry.update(WI, state=SessionState.EXITED.value)
    again = dataclasses.replace(ctx, limiter=None)  # the next spawner on the same state

    assert clean_stale_limits(again) == [NAME]

    assert all(not path.exists() for path in _cgroups(again, WI).values())
    assert wait_for(lambda: (pane := ctx.runner.pane(NAME)) is None or pane.dead)  # killed
    assert all(path.exists() for path in _cgroups(again, CALM).values())
    calm = ctx.runner.pane(item_slug(CALM))
    assert calm is not None and not calm.dead


def test_a_session_whose_cgroup_cannot_be_made_is_refused_rather_than_run_unbounded(
    bounded: SpawnerContext, hostile: StandIn, origin: Path
) -> None:
    ctx = bounded
    _needs_cgroup(ctx)
    _mode(hostile, WI, "calm")
    for parent in limiter_of(ctx).plan.parents.values():
        parent.rmdir()  # gone under the spawner (an operator's cleanup, say)

    ok, _, error = run_job(ctx, spawn_job(origin))

    assert not ok and error is not None and "cgroup cannot be made" in error
    (failed,) = events(ctx, "session.job_failed")
    assert "cgroup cannot be made" in failed["error"]
    assert ctx.runner.pane(NAME) is None and _seen(hostile, WI) is None
