"""Background webhook load for bench/e2e.py, run as a process of its own (its event loop and
GIL apart from the benchmark's and the App's).

Sends signed deliveries of one fixture (an `issue_comment.created` by default) to
`<url>/github/webhooks` at a steady --rate per second, paced by a clock: delivery k is due at
start + k / rate, whatever the earlier ones took. Each has a delivery id and a body of its
own (the fixture with a `"bench_n": k` field spliced in, signed with the webhook secret from
$BENCH_WEBHOOK_SECRET). --connections keep-alive connections share the deliveries, so one
slow acknowledgement does not hold the next back; a delivery waits for a free connection
only when all of them are busy, and its ack latency counts from when it was due.

It prints "ready" once it listens for signals. SIGUSR1 starts the measured window: what was
due before it is not counted. SIGTERM (or --seconds) stops the sending; the deliveries in
flight get up to 5 s, then one JSON line goes to stdout: sent, acked (202), other (another
status), errors (no answer), ack latency p50/p99/max in ms, the window's seconds and the
achieved rate.

Usage: python bench/webhook_load.py --url http://127.0.0.1:PORT [--rate 200]
       [--connections 8] [--seconds 600] [--fixture PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from githubkit.webhooks import sign

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchkit import percentile, splice

FIXTURE = Path(__file__).resolve().parents[1] / "tests/data/github/issue_comment.created.json"
REPLY_TIMEOUT = 10.0
FINISH_SECONDS = 5.0


@dataclass
class Tally:
    """What happened to the deliveries due since `started` (loop time)."""

    started: float
    sent: int = 0
    acked: int = 0
    other: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)

    def report(self, ended: float) -> dict[str, float]:
        ms = [x * 1000 for x in self.latencies] or [0.0]
        seconds = max(1e-9, ended - self.started)
        return {
            "sent": self.sent,
            "acked": self.acked,
            "other": self.other,
            "errors": self.errors,
            "p50_ms": percentile(ms, 0.5),
            "p99_ms": percentile(ms, 0.99),
            "max_ms": max(ms),
            "seconds": seconds,
            "rate": self.sent / seconds,
        }


class Deliveries:
    """The signed request bytes of delivery k."""

    def __init__(self, url: str, fixture: Path, secret: str, event: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.prefix, self.suffix = splice(fixture)
        self.secret, self.event = secret, event
        self.run = uuid.uuid4().hex[:8]

    def request(self, k: int) -> bytes:
        body = self.prefix + str(k).encode() + self.suffix
        head = (
            f"POST /github/webhooks HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"X-GitHub-Event: {self.event}\r\nX-GitHub-Delivery: load-{self.run}-{k}\r\n"
            f"X-Hub-Signature-256: {sign(self.secret, body)}\r\n\r\n"
        )
        return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status, whether the connection stays open) of one HTTP/1.1 response."""
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    status = int(head[0].split()[1])
    headers = {}
    for line in head[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    if headers.get("transfer-encoding") == "chunked":
        while size := int((await reader.readline()).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readline()
    else:
        await reader.readexactly(int(headers.get("content-length", "0")))
    return status, headers.get("connection") != "close"


class Load:
    def __init__(self, deliveries: Deliveries, rate: float, connections: int) -> None:
        self.deliveries = deliveries
        self.rate = rate
        self.connections = connections
        self.loop = asyncio.get_running_loop()
        self.tally = Tally(started=self.loop.time())
        self.stop = asyncio.Event()
        self.queue: asyncio.Queue[tuple[int, float] | None] = asyncio.Queue()

    def start_window(self) -> None:
        self.tally = Tally(started=self.loop.time())

    async def pace(self) -> None:
        """Queue delivery k at its due time until told to stop."""
        start = self.loop.time()
        k = 0
        while not self.stop.is_set():
            due = start + k / self.rate
            if (wait := due - self.loop.time()) > 0:
                try:
                    await asyncio.wait_for(self.stop.wait(), wait)
                    break
                except TimeoutError:
                    pass
            self.queue.put_nowait((k, due))
            k += 1
        for _ in range(self.connections):
            self.queue.put_nowait(None)

    async def connection(self) -> None:
        streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        while (item := await self.queue.get()) is not None:
            k, due = item
            counted = due >= self.tally.started
            tally = self.tally
            try:
                if streams is None:
                    streams = await asyncio.open_connection(
                        self.deliveries.host, self.deliveries.port
                    )
                streams[1].write(self.deliveries.request(k))
                tally.sent += counted
                status, keep = await asyncio.wait_for(read_response(streams[0]), REPLY_TIMEOUT)
            except (OSError, ValueError, asyncio.IncompleteReadError, TimeoutError):
                tally.errors += counted
                close(streams)
                streams = None
                continue
            if counted:
                tally.acked += status == 202
                tally.other += status != 202
                tally.latencies.append(self.loop.time() - due)
            if not keep:
                close(streams)
                streams = None
        close(streams)

    async def run(self, seconds: float) -> dict[str, float]:
        self.loop.add_signal_handler(signal.SIGUSR1, self.start_window)
        self.loop.add_signal_handler(signal.SIGTERM, self.stop.set)
        self.loop.call_later(seconds, self.stop.set)
        print("ready", flush=True)  # the signal handlers are in place
        workers = [asyncio.create_task(self.connection()) for _ in range(self.connections)]
        await self.pace()
        ended = self.loop.time()
        await asyncio.wait(workers, timeout=FINISH_SECONDS)
        return self.tally.report(ended)


def close(streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None) -> None:
    if streams is not None:
        streams[1].close()


async def main_async(args: argparse.Namespace) -> dict[str, float]:
    secret = os.environ["BENCH_WEBHOOK_SECRET"]
    event = args.fixture.name.split(".", 1)[0]
    deliveries = Deliveries(args.url, args.fixture, secret, event)
    return await Load(deliveries, args.rate, args.connections).run(args.seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="the App, e.g. http://127.0.0.1:3000")
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=600.0, help="stop after this at most")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
