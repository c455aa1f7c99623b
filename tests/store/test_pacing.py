"""A prune rests longer while the machine is busy and returns to its short rest once it is
not: the rests follow what /proc/stat says, read from a file the test writes."""

from __future__ import annotations

from pathlib import Path

from app.store.pacing import LONGEST, Pacer, busy_share, cpu_times, next_rest


def stat_line(busy: int, idle: int) -> str:
    # user nice system idle iowait irq softirq steal guest guest_nice
    return f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {busy} 0 0 {idle} 0 0 0 0 0 0\n"


def test_cpu_times_counts_idle_and_io_wait_as_free_and_steal_as_busy(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 5 20 800 40 1 2 30 0 0\n")
    assert cpu_times(stat) == (100 + 5 + 20 + 1 + 2 + 30, 998)
    assert cpu_times(tmp_path / "missing") is None
    stat.write_text("intr 1 2 3\n")
    assert cpu_times(stat) is None


def test_the_busy_share_is_the_busy_ticks_over_all_ticks_between_readings() -> None:
    assert busy_share((100, 1000), (190, 1100)) == 0.9
    assert busy_share((100, 1000), (100, 1000)) is None


def test_a_rest_doubles_while_busy_up_to_the_longest_and_halves_back_to_the_base() -> None:
    rest, seen = 0.02, []
    for _ in range(8):
        rest = next_rest(rest, 0.02, 0.95)
        seen.append(rest)
    assert seen[:3] == [0.04, 0.08, 0.16] and seen[-1] == LONGEST
    assert next_rest(LONGEST, 0.02, 0.3) == LONGEST / 2  # one quiet moment is not the end
    assert next_rest(0.03, 0.02, 0.3) == 0.02
    assert next_rest(0.5, 0.02, None) == 0.02  # nothing to go by: the base rest


def test_a_pacer_reads_the_machine_between_batches(tmp_path: Path) -> None:
    stat = tmp_path / "stat"
    ticks = {"busy": 0, "idle": 0}

    def advance(busy: int, idle: int) -> None:
        ticks["busy"] += busy
        ticks["idle"] += idle
        stat.write_text(stat_line(ticks["busy"], ticks["idle"]))

    advance(0, 0)
    pacer = Pacer(0.02, read=lambda: cpu_times(stat))
    advance(19, 1)  # a flood: 95 % busy
    assert pacer.rest() == 0.04
    advance(19, 1)
    assert pacer.rest() == 0.08
    advance(2, 18)  # the flood is over
    assert pacer.rest() == 0.04
    advance(2, 18)
    assert pacer.rest() == 0.02
    assert Pacer(0, read=lambda: cpu_times(stat)).rest() == 0.0  # no rest asked for, none taken
