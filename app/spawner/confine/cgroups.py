"""The host's side of sessions' limits: what this machine offers (`probe`), and one control
group per session made, entered by its launch, read and removed (`SessionLimiter`).

The spawner's sessions' cgroups live under the spawner's OWN cgroup in each hierarchy
(`/proc/self/cgroup`), in one directory per spawner (`the-loop.<hash of its state
directory>`), so two spawners on one machine never touch each other's sessions. A session's
cgroup is made as the last step of its launch's preparation; the launch enters it before
bubblewrap starts (`enter_limits`). Its end (exit, stop, replacement) kills whatever is
still in it — each process pinned by a pidfd and checked to be in the cgroup before it is
signalled, so a reused pid is never hit — reads what it counted, and removes it. A spawner
starting again removes the cgroups of sessions that are no longer live.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from app.config import SessionLimits
from app.spawner.confine.limits import (
    CONTROLLER,
    SWAP_FILES,
    Counters,
    HostOffer,
    LimitPlan,
    Mechanism,
    cgroup_settings,
    choose_plan,
)

LEAF = "the-loop-spawner"  # where a v2 spawner moves its own processes (no internal ones)
GONE_WAIT = 10.0  # how long a removal waits for killed processes to leave their cgroup


def own_cgroups(text: str) -> dict[str, str]:
    """`/proc/self/cgroup` → controller (or `""` for the v2 tree) → this process's path."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in parts[1].split(",") if parts[1] else [""]:
            found[controller] = parts[2]
    return found


def cgroup_mounts(text: str) -> dict[str, tuple[Path, str]]:
    """`/proc/self/mountinfo` → controller (or `""` for cgroup2) → (mount point, its root)."""
    found: dict[str, tuple[Path, str]] = {}
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3:
            continue
        kind, options = rest[0], rest[2].split(",")
        where = (Path(fields[4]), fields[3])
        if kind == "cgroup2":
            found.setdefault("", where)
        elif kind == "cgroup":
            for controller in ("memory", "pids", "cpu"):
                if controller in options:
                    found.setdefault(controller, where)
    return found


def _own_dir(mount: tuple[Path, str], path: str) -> Path | None:
    point, root = mount
    relative = os.path.relpath(path, root) if path.startswith(root) else None
    if relative is None or relative.startswith(".."):
        return None
    return point if relative == "." else point / relative


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK) and os.access(path / "cgroup.procs", os.W_OK)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def probe(tag: str, proc: Path = Path("/proc/self")) -> HostOffer:
    """What this machine offers a spawner whose cgroups are named `the-loop.<tag>` (read
    only: nothing is made)."""
    own = own_cgroups(_read(proc / "cgroup"))
    mounts = cgroup_mounts(_read(proc / "mountinfo"))
    name = f"the-loop.{tag}"
    root = os.geteuid() == 0
    v1: dict[str, Path] = {}
    for controller in ("memory", "pids", "cpu"):
        if controller in mounts and controller in own:
            mine = _own_dir(mounts[controller], own[controller])
            if mine is not None and _writable(mine):
                v1[controller] = mine / name
    if "" in mounts and "" in own:
        mine = _own_dir(mounts[""], own[""])
        if mine is not None and _writable(mine):
            offered = frozenset(_read(mine / "cgroup.controllers").split())
            return HostOffer(mine / name, offered, v1, root)
    why = "" if v1 else "no writable cgroup (v2 or v1 memory and pids) of the spawner's own"
    return HostOffer(None, frozenset(), v1, root, why)


def spawner_tag(state_dir: Path) -> str:
    return hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]


def _write(path: Path, value: str) -> None:
    with path.open("w") as file:
        file.write(value)


def _ready_v2(parent: Path, controllers: Iterable[str]) -> None:
    """Let `parent` (under the spawner's own v2 cgroup) give its children `controllers`.

    v2 forbids a cgroup both processes and controlled children: the spawner's own processes
    move to a leaf of their own first, when its cgroup holds any."""
    own = parent.parent
    enable = " ".join(f"+{c}" for c in sorted(controllers))
    try:
        _write(own / "cgroup.subtree_control", enable)
    except OSError as exc:
        if exc.errno != errno.EBUSY:
            raise
        (own / LEAF).mkdir(exist_ok=True)
        for pid in _read(own / "cgroup.procs").split():
            try:
                _write(own / LEAF / "cgroup.procs", pid)
            except ProcessLookupError:
                continue
        _write(own / "cgroup.subtree_control", enable)
    parent.mkdir(exist_ok=True)
    _write(parent / "cgroup.subtree_control", enable)


class SessionLimiter:
    """The spawner's sessions' limits: the plan in force and each session's cgroup."""

    def __init__(self, plan: LimitPlan) -> None:
        self.plan = plan

    @classmethod
    def for_host(
        cls, offer: HostOffer, limits: SessionLimits, *, sandboxed: bool
    ) -> SessionLimiter:
        """The best plan `offer` allows whose cgroups can really be made here: a mechanism
        whose parent directories cannot be made is dropped for the next best."""
        while True:
            plan = choose_plan(offer, limits, sandboxed=sandboxed)
            try:
                cls._prepare(plan)
                return cls(plan)
            except OSError:
                if plan.mechanism is Mechanism.CGROUP2:
                    offer = replace(offer, cgroup2=None, why="the v2 cgroup could not be made")
                else:
                    offer = replace(offer, cgroup1={}, why="the v1 cgroups could not be made")

    @staticmethod
    def _prepare(plan: LimitPlan) -> None:
        if plan.mechanism is Mechanism.CGROUP2:
            used = {CONTROLLER[name] for name in plan.enforced}
            _ready_v2(plan.parents[""], used)
        elif plan.mechanism is Mechanism.CGROUP1:
            for parent in plan.parents.values():
                parent.mkdir(exist_ok=True)

    def _dirs(self, slug: str) -> dict[str, Path]:
        return {key: parent / slug for key, parent in self.plan.parents.items()}

    def open(self, slug: str) -> list[Path]:
        """Make the session `slug`'s cgroups (a leftover of the same name is emptied and
        removed first) with the plan's limits; returns the `cgroup.procs` files its launch
        enters. Raises OSError when one cannot be made."""
        self.close(slug)
        settings = cgroup_settings(self.plan)
        procs: list[Path] = []
        for key, directory in self._dirs(slug).items():
            directory.mkdir()
            for name, value in settings.get(key, {}).items():
                if name in SWAP_FILES and not (directory / name).exists():
                    continue
                _write(directory / name, value)
            procs.append(directory / "cgroup.procs")
        return procs

    def counters(self, slug: str) -> Counters | None:
        """What the session's cgroup counted (None: it has none)."""
        dirs = self._dirs(slug)
        if not dirs or not any(d.is_dir() for d in dirs.values()):
            return None
        v2 = self.plan.mechanism is Mechanism.CGROUP2
        memory = dirs.get("" if v2 else "memory")
        pids = dirs.get("" if v2 else "pids")
        events = "memory.events" if v2 else "memory.oom_control"
        oom = _count(memory / events, "oom_kill") if memory is not None else 0
        refused = _count(pids / "pids.events", "max") if pids is not None else 0
        return Counters(oom, refused)

    def close(self, slug: str) -> Counters | None:
        """Kill what is left in the session's cgroups, say what they counted, remove them."""
        found = self.counters(slug)
        for directory in self._dirs(slug).values():
            _remove(directory)
        return found

    def clean_stale(self, live: Iterable[str]) -> list[str]:
        """Remove the cgroups of this spawner's sessions that are not `live` (slugs)."""
        keep, removed = set(live), []
        for parent in self.plan.parents.values():
            children = [p for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
            for child in children:
                if child.name not in keep:
                    _remove(child)
                    removed.append(child.name)
        return sorted(set(removed))

    def release(self) -> None:
        """Every session's cgroup emptied and removed, and this spawner's directories too
        (the end of a spawner whose sessions end with it, as in a test)."""
        for parent in self.plan.parents.values():
            _release_parent(parent)


def _release_parent(parent: Path) -> None:
    """A spawner's cgroup directory gone with every session's cgroup in it."""
    children = [p for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    for child in children:
        _remove(child)
    _remove(parent)


def _count(path: Path, key: str) -> int:
    for line in _read(path).splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return 0


def _members(directory: Path) -> list[int]:
    return [int(p) for p in _read(directory / "cgroup.procs").split() if p.isdigit()]


def _kill_member(pid: int, directory: Path) -> None:
    """SIGKILL `pid` if it is (still) in `directory`'s cgroup: the pidfd pins the process,
    so the check and the signal are about the same one."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        paths = own_cgroups(_read(Path(f"/proc/{pid}/cgroup"))).values()
        if any(directory.as_posix().endswith(path) for path in paths if path != "/"):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove(directory: Path) -> None:
    """Empty `directory`'s cgroup (every process killed, a forking one until none is left)
    and remove it; a cgroup that will not go is left, to be retried by the next clean."""
    if not directory.is_dir():
        return
    kill = directory / "cgroup.kill"
    deadline = time.monotonic() + GONE_WAIT
    while time.monotonic() < deadline:
        if kill.exists():
            with contextlib.suppress(OSError):
                _write(kill, "1")
        for pid in _members(directory):
            _kill_member(pid, directory)
        try:
            directory.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.05)


def release_spawners_under(roots: Iterable[Path]) -> None:
    """The cgroups of every spawner whose state directory lies under `roots` (a test run's
    or a bench's temporary directories) emptied and removed: such a spawner's sessions end
    with its tmux server, while a spawner leaves its live sessions' cgroups behind. Other
    spawners' cgroups (other tags) are never touched; no link is followed looking."""
    tags = {
        spawner_tag(Path(top) / name)
        for root in roots
        for top, names, _ in os.walk(root)
        for name in names
    }
    offer = probe("-")
    mine = [path.parent for path in offer.cgroup1.values()]
    mine += [offer.cgroup2.parent] if offer.cgroup2 is not None else []
    for directory in mine:
        for parent in directory.glob("the-loop.*"):
            if parent.name.removeprefix("the-loop.") in tags:
                _release_parent(parent)
