"""Where a request body is parsed and judged (`reach.refusal`): never on the gateway's loop.

A parse holds the interpreter's lock for as long as its C code runs, so a thread beside the
loop still stalls it for a large body. A body up to `IN_THREAD` bytes (nearly every real
request) is judged in a thread, where the lock is held a few milliseconds at most; a larger one
in a process of its own (`PROCESSES` at most, started on the first large body), so a session
sending large bodies costs the other sessions no time on the loop, and the memory its parse
takes is that process's. A process that dies mid-judgement (killed, out of memory) leaves the
body refused and the pool made anew for the next.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from app.gateway.reach import Refused, refusal
from app.gateway.wires import WIRES, Wire

IN_THREAD = 1024 * 1024
THREADS = 2
PROCESSES = 2
BROKEN = Refused("the model gateway could not judge the request body", "not_judged")


def judge(body: bytes, wire_name: str, allowed: frozenset[str]) -> Refused | None:
    """`reach.refusal` for the wire named `wire_name` (a process is given names, not objects)."""
    wire = next(w for w in WIRES if w.name == wire_name)
    return refusal(body, wire, allowed)


class Judges:
    """The gateway's threads and processes that judge bodies; `close()` ends them."""

    def __init__(self) -> None:
        self._threads = ThreadPoolExecutor(THREADS, thread_name_prefix="model-gateway-judge")
        self._processes: ProcessPoolExecutor | None = None

    def _pool(self) -> Executor:
        if self._processes is None:
            context = multiprocessing.get_context("spawn")  # the spawner holds threads: no fork
            self._processes = ProcessPoolExecutor(PROCESSES, mp_context=context)
        return self._processes

    async def refusal(self, body: bytes, wire: Wire, allowed: frozenset[str]) -> Refused | None:
        """Why `body` may not go upstream on `wire` (`reach.refusal`), judged off the loop."""
        loop = asyncio.get_running_loop()
        if len(body) <= IN_THREAD:
            return await loop.run_in_executor(self._threads, judge, body, wire.name, allowed)
        pool = self._pool()
        try:
            return await loop.run_in_executor(pool, judge, body, wire.name, allowed)
        except BrokenProcessPool:
            if self._processes is pool:
                self._processes = None
            pool.shutdown(wait=False, cancel_futures=True)
            return BROKEN

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        if self._processes is not None:
            self._processes.shutdown(wait=False, cancel_futures=True)
