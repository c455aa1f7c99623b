"""Helpers shared by the benchmarks that run `the-loop` as processes (bench/ingest.py, bench/e2e.py,
and spawnerkit's `Stack(serve=True)`): a free port, a `the-loop` subprocess and its health
check, the inbox's states, the CPU time the hypervisor stole (/proc/stat), and a probe of the
database's own commit latency."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import TracebackType

import httpx
from sqlalchemy import NullPool, create_engine, func, select, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from app.store.pacing import stat_ticks  # noqa: E402
from app.store.tables import Delivery  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile of `values`, by the nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def splice(fixture: Path) -> tuple[bytes, bytes]:
    """The fixture's JSON as `prefix + n + suffix`, with a `bench_n` field of its own per
    delivery: the App stores a signed body once, so every request needs a body of its own."""
    text = fixture.read_bytes()
    assert text.startswith(b"{")
    return b'{"bench_n": ', b"," + text[1:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def steal() -> tuple[int, int]:
    """(steal, total) CPU ticks so far, from /proc/stat ((0, 0) where it cannot be read)."""
    ticks = stat_ticks() or [0] * 8
    return ticks[7], sum(ticks)


def steal_percent(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The share of CPU time stolen between two `steal()` readings, in percent."""
    return 100 * (after[0] - before[0]) / max(1, after[1] - before[1])


def start_process(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
    """`the-loop <args>` in a session of its own; its stderr goes to `server-<n>.log`."""
    log = cwd / f"server-{len(list(cwd.glob('server-*.log')))}.log"
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", *args],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )


def wait_healthy(url: str) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def inbox_counts(db_url: str) -> dict[str, int]:
    """How many deliveries the inbox holds in each state (queued, done, parked)."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(select(Delivery.state, func.count()).group_by(Delivery.state))
            return {str(state): int(count) for state, count in rows}
    finally:
        engine.dispose()


class CommitProbe:
    """While open, a connection of its own commits a one-row INSERT to a table of its own
    every `interval` seconds and times each commit: the database's (and its disk's) commit
    latency beside the App's. When the App's acknowledgements stall and the probe's commits
    stall at the same moment, the time went to the database, not to the App."""

    TABLE = "bench_commit_probe"

    def __init__(self, db_url: str, interval: float = 0.02) -> None:
        self.engine = create_engine(db_url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        self.interval = interval
        self.latencies: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="commit-probe", daemon=True)

    def __enter__(self) -> CommitProbe:
        with self.engine.connect() as conn:
            conn.execute(text(f"CREATE TABLE IF NOT EXISTS {self.TABLE} (at TIMESTAMPTZ)"))
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.engine.dispose()

    def _run(self) -> None:
        insert = text(f"INSERT INTO {self.TABLE} (at) VALUES (now())")
        with self.engine.connect() as conn:
            while not self._stop.wait(self.interval):
                started = time.perf_counter()
                conn.execute(insert)
                self.latencies.append(time.perf_counter() - started)

    def summary(self) -> str:
        ms = [x * 1000 for x in self.latencies] or [0.0]
        slow = sum(x > 50 for x in ms)
        return (
            f"{len(self.latencies)} one-row commits every {self.interval * 1000:.0f} ms on a "
            f"connection of its own: p50 {percentile(ms, 0.5):.1f} ms   p99 "
            f"{percentile(ms, 0.99):.1f} ms   max {max(ms):.1f} ms   ({slow} over 50 ms)"
        )
