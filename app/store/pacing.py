"""How long background store work rests between its batches.

A prune pass is work that can wait; acknowledging webhooks cannot. While the machine's
CPUs have time to spare the pass rests its base pause between batches. While they are
nearly all busy — a flood being acknowledged — each rest doubles, up to LONGEST, so the
pass takes almost nothing from the flood and catches up after it. The busy share is read
from `/proc/stat` over the last batch and rest; where that file is missing (not Linux) the
pass keeps its base pause.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

LONGEST = 1.0  # seconds: the longest rest, so a pass never stalls for good
BUSY = 0.8  # share of CPU time in use above which the machine counts as busy
PROC_STAT = Path("/proc/stat")

CpuTimes = tuple[int, int]  # (busy, total) clock ticks since boot, all CPUs


def stat_ticks(path: Path = PROC_STAT) -> list[int] | None:
    """All CPUs' clock ticks since boot from `/proc/stat` — user, nice, system, idle, iowait,
    irq, softirq, steal — or None where it cannot be read."""
    try:
        with path.open() as stat:
            first = stat.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    return [int(value) for value in first[1:9]]


def cpu_times(path: Path = PROC_STAT) -> CpuTimes | None:
    """All CPUs' (busy, total) ticks, or None where they cannot be read. Idle and I/O wait
    count as not busy; time stolen by the hypervisor counts as busy."""
    ticks = stat_ticks(path)
    if ticks is None:
        return None
    total = sum(ticks)
    return total - ticks[3] - ticks[4], total


def busy_share(before: CpuTimes, after: CpuTimes) -> float | None:
    """The share of CPU time in use between two readings, or None when no time passed."""
    total = after[1] - before[1]
    return (after[0] - before[0]) / total if total > 0 else None


def next_rest(current: float, base: float, share: float | None) -> float:
    """The rest after a batch: doubled (up to LONGEST) while the machine is busy, halved
    (down to `base`) while it is not, so one quiet moment in a flood does not undo it."""
    if share is None:
        return base
    if share >= BUSY:
        return min(LONGEST, max(current, base) * 2)
    return max(base, current / 2)


class Pacer:
    """The rests of one pass: `rest()` says how long to sleep after each batch."""

    def __init__(self, base: float, read: Callable[[], CpuTimes | None] = cpu_times) -> None:
        self.base = base
        self.read = read
        self.current = base
        self._last = read() if base > 0 else None

    def rest(self) -> float:
        if self.base <= 0:
            return 0.0
        now = self.read()
        share = busy_share(self._last, now) if self._last and now else None
        self._last = now
        self.current = next_rest(self.current, self.base, share)
        return self.current
