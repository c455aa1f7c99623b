"""How a session's memory, processes and CPU are bounded on this devbox, chosen from what the
host offers (pure: facts in, a plan out; `cgroups` gathers the facts and acts on the plan).

A session runs whatever an issue's author could talk it into: a fork bomb or an allocation
loop would otherwise take the devbox, and the App and spawner on it, down. The best bound is
a control group of the session's own, one the spawner made and the launch enters before
bubblewrap starts (so every process of the session is in it, and none can leave: no session
sees `/sys/fs/cgroup`):

1. `cgroup2`: a writable cgroup v2 subtree of the spawner's own (e.g. a systemd unit with
   `Delegate=yes`) whose controllers include `memory` and `pids` (`cpu` too, if offered);
2. `cgroup1`: the v1 `memory` and `pids` hierarchies, writable where the spawner's own
   cgroups are (`cpu` too, if mounted and writable);
3. `rlimit`: resource limits set inside the sandbox, after bubblewrap made the session's user
   namespace — `RLIMIT_AS` per process (a bound per process, not per session) and
   `RLIMIT_NPROC`, which counts the processes of the session's namespace. The kernel never
   applies `RLIMIT_NPROC` to root, nor counts apart the processes of an unconfined session.
4. `none`: nothing asked, or nothing able to enforce it. Every launch then warns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from app.config import SessionLimits

MEMORY, PROCESSES, CPU = "memory", "processes", "cpu"
# The kernel's controller behind each limit.
CONTROLLER = {MEMORY: "memory", PROCESSES: "pids", CPU: "cpu"}
CPU_PERIOD = 100_000  # microseconds: a cgroup's CPU quota is counted per this period


class Mechanism(StrEnum):
    CGROUP2 = "cgroup2"
    CGROUP1 = "cgroup1"
    RLIMIT = "rlimit"
    NONE = "none"


@dataclass(frozen=True)
class HostOffer:
    """What this host offers a spawner (gathered by `cgroups.probe`).

    `cgroup2`: a writable v2 directory under the spawner's own cgroup where per-session
    cgroups can be made, with the controllers its children get; `cgroup1`: each v1
    controller's writable directory under the spawner's own cgroup in that hierarchy;
    `root`: the spawner runs as uid 0."""

    cgroup2: Path | None = None
    cgroup2_controllers: frozenset[str] = frozenset()
    cgroup1: Mapping[str, Path] = field(default_factory=dict)
    root: bool = False
    why: str = ""  # what the probe found in the way of a cgroup, for the doctor


@dataclass(frozen=True)
class LimitPlan:
    """What bounds every session: the mechanism, where its cgroups go (controller → parent
    directory; `""` for v2's one tree), the limits enforced and those that are not (with why)."""

    mechanism: Mechanism
    limits: SessionLimits
    parents: Mapping[str, Path] = field(default_factory=dict)
    enforced: tuple[str, ...] = ()
    unenforced: tuple[tuple[str, str], ...] = ()

    @property
    def weak(self) -> bool:
        """Is some limit the operator asked for not enforced?"""
        return bool(self.unenforced)


def wanted(limits: SessionLimits) -> list[str]:
    """The limits the operator asked for (a `null` one is lifted)."""
    values = {MEMORY: limits.memory, PROCESSES: limits.processes, CPU: limits.cpu}
    return [name for name, value in values.items() if value is not None]


def choose_plan(offer: HostOffer, limits: SessionLimits, *, sandboxed: bool) -> LimitPlan:
    """The best mechanism `offer` has for `limits`: a cgroup mechanism needs the controllers
    of memory and processes (whichever are asked for); CPU is bounded only where a cgroup
    offers its controller. `sandboxed`: sessions run in bubblewrap's namespaces."""
    asked = wanted(limits)
    if not asked:
        return LimitPlan(Mechanism.NONE, limits)
    core = {CONTROLLER[name] for name in asked if name != CPU}
    if offer.cgroup2 is not None and core <= offer.cgroup2_controllers:
        offered = offer.cgroup2_controllers
        return _cgroup_plan(Mechanism.CGROUP2, limits, asked, offered, {"": offer.cgroup2})
    if core <= set(offer.cgroup1):
        need = {CONTROLLER[name] for name in asked} & set(offer.cgroup1)
        parents = {name: offer.cgroup1[name] for name in sorted(need)}
        return _cgroup_plan(Mechanism.CGROUP1, limits, asked, frozenset(need), parents)
    return _rlimit_plan(offer, limits, asked, sandboxed)


def _cgroup_plan(
    mechanism: Mechanism,
    limits: SessionLimits,
    asked: list[str],
    offered: frozenset[str],
    parents: Mapping[str, Path],
) -> LimitPlan:
    enforced = tuple(name for name in asked if CONTROLLER[name] in offered)
    unenforced = tuple(
        (name, f"the {CONTROLLER[name]} controller is not offered")
        for name in asked
        if name not in enforced
    )
    return LimitPlan(mechanism, limits, parents, enforced, unenforced)


def _rlimit_plan(
    offer: HostOffer, limits: SessionLimits, asked: list[str], sandboxed: bool
) -> LimitPlan:
    enforced: list[str] = []
    unenforced: list[tuple[str, str]] = []
    for name in asked:
        if name == MEMORY:
            enforced.append(name)  # per process (RLIMIT_AS)
        elif name == CPU:
            unenforced.append((name, "no cgroup: a CPU share needs one"))
        elif offer.root:
            unenforced.append((name, "the spawner runs as root, whom RLIMIT_NPROC never binds"))
        elif not sandboxed:
            unenforced.append((name, "unconfined sessions share the user's process count"))
        else:
            enforced.append(name)  # counted in the session's user namespace (RLIMIT_NPROC)
    if not enforced:
        return LimitPlan(Mechanism.NONE, limits, {}, (), tuple(unenforced))
    return LimitPlan(Mechanism.RLIMIT, limits, {}, tuple(enforced), tuple(unenforced))


# Files a kernel without swap accounting lacks: no swap to bound then.
SWAP_FILES = frozenset({"memory.swap.max", "memory.memsw.limit_in_bytes"})


def cgroup_settings(plan: LimitPlan) -> dict[str, dict[str, str]]:
    """Controller → {file: value} a session's cgroup is given (`""` for v2's one directory),
    in the order they are written. Swap is bounded with memory: a session never swaps past
    its memory limit (`SWAP_FILES`, where the kernel accounts swap)."""
    limits = plan.limits
    v2 = plan.mechanism is Mechanism.CGROUP2
    files: dict[str, dict[str, str]] = {}

    def put(controller: str, name: str, value: str) -> None:
        files.setdefault("" if v2 else controller, {})[name] = value

    if MEMORY in plan.enforced and limits.memory is not None:
        if v2:
            put("memory", "memory.max", str(int(limits.memory)))
            put("memory", "memory.swap.max", "0")
        else:  # memory first: memory+swap may never be set below it
            put("memory", "memory.limit_in_bytes", str(int(limits.memory)))
            put("memory", "memory.memsw.limit_in_bytes", str(int(limits.memory)))
    if PROCESSES in plan.enforced and limits.processes is not None:
        put("pids", "pids.max", str(limits.processes))
    if CPU in plan.enforced and limits.cpu is not None:
        quota = max(1000, round(limits.cpu * CPU_PERIOD))
        if v2:
            put("cpu", "cpu.max", f"{quota} {CPU_PERIOD}")
        else:
            put("cpu", "cpu.cfs_period_us", str(CPU_PERIOD))
            put("cpu", "cpu.cfs_quota_us", str(quota))
    return files


def rlimit_args(plan: LimitPlan) -> list[str]:
    """The arguments of `enter_limits` that set the plan's resource limits in the sandbox."""
    if plan.mechanism is not Mechanism.RLIMIT:
        return []
    words: list[str] = []
    if MEMORY in plan.enforced and plan.limits.memory is not None:
        words += ["--address-space", str(int(plan.limits.memory))]
    if PROCESSES in plan.enforced and plan.limits.processes is not None:
        words += ["--processes", str(plan.limits.processes)]
    return words


@dataclass(frozen=True)
class Counters:
    """What a session's cgroup counted by its end: memory kills and refused forks."""

    oom_kills: int = 0
    forks_refused: int = 0


def ending_facts(counters: Counters | None) -> dict[str, object]:
    """What `session.exited` / `session.stopped` say of the limits (`limit`: the one the
    session met, memory first: an OOM kill is what ends a session; refused forks only may)."""
    if counters is None:
        return {}
    facts: dict[str, object] = {
        "oom_kills": counters.oom_kills,
        "forks_refused": counters.forks_refused,
    }
    if counters.oom_kills:
        facts["limit"] = MEMORY
    elif counters.forks_refused:
        facts["limit"] = PROCESSES
    return facts


def _amount(name: str, limits: SessionLimits) -> str:
    if name == MEMORY and limits.memory is not None:
        return f"memory {limits.memory.human_readable(decimal=False)}"
    if name == PROCESSES:
        return f"processes {limits.processes}"
    return f"cpu {limits.cpu}"


def describe_plan(plan: LimitPlan) -> str:
    """One line for the doctor and the launch warning: the mechanism and each limit."""
    if not wanted(plan.limits):
        return "none: routing.sandbox.limits lifts every limit"
    parts = [_amount(name, plan.limits) for name in plan.enforced]
    if plan.mechanism is Mechanism.RLIMIT and MEMORY in plan.enforced:
        parts = [p + " per process" if p.startswith(MEMORY) else p for p in parts]
    said = f"{plan.mechanism.value}: " + (", ".join(parts) or "nothing enforced")
    missing = "; ".join(
        f"{_amount(name, plan.limits)} NOT enforced ({why})" for name, why in plan.unenforced
    )
    return f"{said}; {missing}" if missing else said
