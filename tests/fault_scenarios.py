"""The fault scenarios, sized by their caller: `tests/e2e/test_faults.py` runs them small,
`bench/fault.py` at full size. Each returns a `Tally` of what was acknowledged, lost and doubled.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from app.store.tables import JobState
from tests.fault_support import Sender, Tally, burst, fault_bed, labeled_body, tally
from tests.support import wait_for


def settle_seconds(count: int) -> float:
    """How long a scenario waits for `count` deliveries or jobs: long enough for a slow
    shared machine (a bound, never a pace the test asserts)."""
    return max(120.0, count * 0.2)


def redeliveries(directory: Path, count: int) -> Tally:
    """Two replicas and a worker; `count` deliveries and 10 % of them delivered twice, the
    copies spread over both replicas: every delivery is handled once."""
    with fault_bed(directory) as bed:
        replicas = bed.replicas(2)
        bed.worker()
        sender = Sender([r.url for r in replicas])
        sender.send(burst(count), timeout=settle_seconds(count))
        wait_for(lambda: bed.settled(count), timeout=settle_seconds(count), interval=0.5)
        return tally(bed, sender.acked)


def replica_killed(directory: Path, count: int) -> Tally:
    """Two replicas (each with an inbox worker) and a worker; one replica is SIGKILLed when a
    third of the burst is acknowledged. The sender delivers again what was not acknowledged:
    every acknowledged delivery is handled once, none twice."""
    with fault_bed(directory, THE_LOOP_INBOX_LEASE_SECONDS="5") as bed:
        replicas = bed.replicas(2)
        bed.worker()
        sender = Sender([r.url for r in replicas])
        victim = replicas[0]

        def kill_when_a_third_is_in() -> None:
            while len(sender.acked) < count // 3:
                time.sleep(0.01)
            sender.drop(victim.url)
            victim.kill(signal.SIGKILL)

        killer = threading.Thread(target=kill_when_a_third_is_in, daemon=True)
        killer.start()
        sender.send(burst(count, redelivered=0), timeout=settle_seconds(count))
        killer.join(timeout=30)
        assert victim.popen.returncode == -signal.SIGKILL
        wait_for(
            lambda: bed.settled(len(sender.acked)), timeout=settle_seconds(count), interval=0.5
        )
        return tally(bed, sender.acked)


def spawners_claim(directory: Path, count: int, spawners: int = 3) -> Tally:
    """Two replicas, `spawners` spawner processes and `count` spawn jobs; one spawner is
    SIGKILLed in the middle of its fifth job. Every job is done by exactly one spawner, the
    dead one's job too, once its lease ran out."""
    with fault_bed(directory, THE_LOOP_JOB_LEASE_SECONDS="3") as bed:
        replicas = bed.replicas(2, inbox_workers=0)
        ids = bed.queue_spawns(count)
        logs = [directory / f"spawner-{i}.log" for i in range(spawners)]
        procs = []
        for i, log in enumerate(logs):
            args = ["tests.fault_spawner", replicas[i % 2].url, bed.spawner_token(f"s{i}")]
            procs.append(bed.start([*args, str(log), *(["--hold", "5"] if i == 0 else [])]))
        wait_for(lambda: _lines(logs[0], "start") and len(_lines(logs[0], "start")) >= 5, 60)
        procs[0].kill(signal.SIGKILL)
        held = _lines(logs[0], "start")[-1]
        everything_done = lambda: all(j.state == JobState.DONE for j in bed.jobs().values())  # noqa: E731
        try:
            wait_for(everything_done, settle_seconds(count), 0.5)
        except AssertionError as exc:  # say where the jobs stand and what each process saw
            states = Counter(str(j.state) for j in bed.jobs().values())
            seen = [(p.log, p.tail()[-1500:]) for p in bed.procs]
            seen += [(log, log.read_text()[-600:]) for log in logs if log.exists()]
            logs_seen = "\n".join(f"--- {path.name}\n{text}" for path, text in seen)
            raise AssertionError(f"{exc}\njobs by state: {dict(states)}\n{logs_seen}") from None
        # A spawner logs `done` once the App has accepted its result, so the last line may
        # come a moment after the job shows done; a job no spawner logs is still lost.
        done = _done_lines(logs, ids, within=10.0)
        assert held not in _lines(logs[0], "done")
        assert bed.jobs()[held].attempts >= 2, "the dead spawner's job was not offered again"
        lost = [j for j in ids if done[j] == 0]
        doubled = [j for j, n in done.items() if n > 1]
        return Tally(len(ids), lost, doubled, "jobs queued")


BROKEN_REPO = "Broken/Repo"
ADMIN = {"Authorization": "Bearer fault-admin-token-0123456789"}


def github_flaky(directory: Path, count: int) -> tuple[Tally, dict[str, Any]]:
    """GitHub answers 502, then 429 with `Retry-After`, for a while: every delivery is still
    handled once. One delivery fails for good (its repository answers 403): it is parked
    with its error, in `the-loop inbox` and in `/status` (returned as `parked`)."""
    with fault_bed(
        directory, THE_LOOP_INBOX_ATTEMPTS="3", THE_LOOP_INBOX_BACKOFF_SECONDS="0.5"
    ) as bed:
        fake = bed.fake
        comments = r"^/repos/Codertocat/Hello-World/issues/\d+/comments$"
        for _ in range(6):
            fake.fail_next(comments, 502)
        for _ in range(6):
            fake.fail_next(comments, 429, {"Retry-After": "1"})
        for _ in range(1000):  # every try of the broken repository's delivery, and more
            fake.fail_next(f"^/repos/{BROKEN_REPO}/", 403)
        replicas = bed.replicas(2)
        bed.worker()
        sender = Sender([r.url for r in replicas])
        sender.send([*burst(count, redelivered=0), ("broken-1", labeled_body(1, BROKEN_REPO))])
        wait_for(lambda: bed.settled(count + 1), timeout=settle_seconds(count), interval=0.5)
        injected = sum(1 for r in fake.requests if r.path.startswith("/repos/Codertocat"))
        listed = bed.cli("inbox", "--state", "parked")
        status = httpx.get(f"{replicas[1].url}/status", headers=ADMIN, timeout=10).json()
        parked = {
            "cli": listed,
            "status": status["parked_deliveries"],
            "left_to_inject": sum(1 for f in fake._failures if "Codertocat" in f[0].pattern),
            "requests": injected,
        }
        acked = sender.acked - {"broken-1"}
        return tally(bed, acked), parked


def database_outage(
    directory: Path, count: int, seconds: float = 3.0, restart: list[str] | None = None
) -> tuple[Tally, int]:
    """The database goes away in the middle of a burst: every connection of the App is cut
    and new ones are refused for `seconds` (what a PostgreSQL restart does to it, on this
    database only, so a shared server's other users are not disturbed). The App reconnects by
    itself: every delivery acknowledged before is handled, once; returns the tally and how
    many were acknowledged before the outage. With `restart`, that command (e.g.
    `pg_ctlcluster 15 main restart`) restarts the whole server instead."""
    with fault_bed(directory) as bed:
        replicas = bed.replicas(2)
        bed.worker()
        sender = Sender([r.url for r in replicas])
        before: set[str] = set()

        def outage_at_a_third() -> None:
            while len(sender.acked) < count // 3:
                time.sleep(0.01)
            if restart:
                before.update(sender.acked)
                subprocess.run(restart, check=True, timeout=120)
                return
            with bed.outage():
                before.update(sender.acked)
                time.sleep(seconds)

        cut = threading.Thread(target=outage_at_a_third, daemon=True)
        cut.start()
        sender.send(burst(count, redelivered=0), timeout=settle_seconds(count))
        cut.join(timeout=30)
        assert before, "the outage never happened"
        wait_for(
            lambda: bed.settled(len(sender.acked)), timeout=settle_seconds(count), interval=0.5
        )
        result = tally(bed, sender.acked)
        assert before <= sender.acked
        return result, len(before)


def _done_lines(logs: list[Path], ids: list[int], within: float) -> Counter[int]:
    """How many times each job was logged done, once every one of `ids` is or `within`
    seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        done = Counter(job for log in logs for job in _lines(log, "done"))
        if all(done[j] for j in ids) or time.monotonic() > deadline:
            return done
        time.sleep(0.1)


def _lines(log: Path, kind: str) -> list[int]:
    if not log.exists():
        return []
    words = (line.split() for line in log.read_text().splitlines())
    return [int(w[1]) for w in words if len(w) >= 2 and w[0] == kind]
