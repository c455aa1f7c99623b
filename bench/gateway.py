#!/usr/bin/env python3
"""What the model gateway adds to a stream: time to first byte and whole-stream time of a
streamed Messages API answer through the gateway vs straight to the scripted model
(tests/fakes/anthropic.py), with 1 and with 20 streams at once, and the gateway's RSS.

The gateway runs in a process of its own (as in the spawner, one asyncio thread), so its
resident memory is its own; the client alternates direct and gateway requests so both see
the same machine. Targets: added p50 ≤ 5 ms, p99 ≤ 20 ms; gateway RSS ≤ 40 MB.

The concurrent streams are paced: each pauses a random while (`--think` ms on average) before
each request, so the load offered is the same however fast the gateway is. Without pauses the
run is a closed loop that measures the queue of whichever process saturates first: with a
client lighter than the gateway, the gateway's queue of 20; with a heavier one (httpx in
threads was), the client's own slowness. The CPU each process spent per stream is printed so
a run shows which one was busiest.
With `--deltas N` each answer streams event by event as a model's does (its text in N deltas,
1 ms apart), so the gateway's work per chunk is in the figures too; by default the scripted
model writes a whole answer at once, and a relayed stream is one chunk.

The flood scenario (`--scenario flood`; `all`, the default, runs both) is a hostile session's:
a process of its own sends 60 MiB request bodies of nested empty objects (`[{},{},…]`), four at
once, each again 0.1 s after it was answered (a retrying client, not a flood of connections,
which is another bench's), their length announced (`--flood-kinds announced`, the default: refused
413 from the head); `chunked` sends them in chunks (read until they pass `maxRequestBytes`,
then refused), `within` sends 30 MiB ones within the limit whose values are too many for the
parse to take (judged in a process beside the gateway). Meanwhile another session's small
requests go through the gateway: their p99 must stay ≤ 20 ms, and the gateway's RSS is
printed.
Usage: bench/gateway.py [--requests N] [--concurrency C] [--think MS] [--deltas N]
                     [--scenario streams|flood|all] [--flood-seconds S] [--flood-kinds K,…]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

ADDED_P50, ADDED_P99, RSS_MB = 0.005, 0.020, 40.0
FLOOD_P99 = 0.020  # small requests' p99 while the large bodies are refused
FLOOD_BODY = 60 * 1024 * 1024
ATTACKERS = 4
BODY = {
    "model": "claude-opus-4",
    "stream": True,
    "max_tokens": 100,
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "benchmark"}],
}


def child(upstream: str, passes: int) -> None:
    """The gateway alone in this process (`--child UPSTREAM PASSES`): prints its URL and
    passes, serves until stdin ends."""
    from app.gateway.forwarding import Upstream
    from app.gateway.relay import ModelGateway

    gateway = ModelGateway(Upstream(upstream, ((b"x-api-key", b"bench-key"),), "env")).start()
    tokens = [gateway.passes.mint(f"github:o/r#{n}") for n in range(passes)]
    print(json.dumps({"url": gateway.url, "tokens": tokens}), flush=True)
    sys.stdin.read()
    gateway.stop()


def model_child(deltas: int) -> None:
    """The scripted model in a process of its own (`--model DELTAS`), so neither it nor the
    gateway shares an interpreter lock with the client: prints its URL, serves until stdin
    ends. With DELTAS > 0 a streamed answer goes out as a model sends one, its text in DELTAS
    deltas and each event written on its own, 1 ms after the last (the gateway's work per
    chunk then shows); with 0, the whole answer in one write."""
    from http.server import BaseHTTPRequestHandler

    from tests.fakes.anthropic import FakeAnthropic

    class Paced(FakeAnthropic):
        def handler(self) -> type[BaseHTTPRequestHandler]:
            scripted: Any = super().handler()

            class Handler(scripted):
                def send_payload(self, status: int, payload: bytes, content_type: str) -> None:
                    if not deltas or content_type != "text/event-stream":
                        super().send_payload(status, payload, content_type)
                        return
                    events = streamed(payload, deltas)
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(sum(map(len, events))))
                    self.end_headers()
                    for event in events:
                        time.sleep(0.001)
                        self.wfile.write(event)

            return Handler

    with Paced() as model:
        print(json.dumps({"url": model.url}), flush=True)
        sys.stdin.read()


def streamed(payload: bytes, deltas: int) -> list[bytes]:
    """A Messages SSE answer's events, its text delta replaced by `deltas` of them."""
    events = [event + b"\n\n" for event in payload.split(b"\n\n") if event]
    out: list[bytes] = []
    for event in events:
        if b"text_delta" not in event:
            out.append(event)
            continue
        for n in range(deltas):
            delta = {"type": "text_delta", "text": f" token{n}"}
            data = {"type": "content_block_delta", "index": 0, "delta": delta}
            out.append(b"event: content_block_delta\ndata: " + json.dumps(data).encode() + b"\n\n")
    return out


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    # Before anything else is imported: the child's memory is the gateway's alone.
    child(sys.argv[2], int(sys.argv[3]))
    sys.exit(0)
KINDS = ("announced", "chunked", "within")
PAUSE = 0.1  # seconds an attacker waits after one body is answered before sending the next


def flood_child(url: str, token: str, kinds: list[int]) -> None:
    """A hostile session (`--flood URL TOKEN`): `ATTACKERS` connections at once, each sending
    large bodies of nested empty objects until stdin ends; prints how many were answered
    413 and 403 (too many values) when it ends."""
    import threading

    stop = threading.Event()

    def until_stdin_ends() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=until_stdin_ends, daemon=True).start()
    counts: dict[str, int] = {}
    host, port = url.removeprefix("http://").rsplit(":", 1)
    block = b"{}," * (1024 * 1024 // 3)  # about 1 MiB of empty objects

    async def one(kind: int) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        head = f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n"
        size = FLOOD_BODY if kind != 2 else 30 * 1024 * 1024
        if kind == 1:
            head += "transfer-encoding: chunked\r\n\r\n"
        else:
            head += f"content-length: {size}\r\n\r\n"
        answered = asyncio.ensure_future(reader.read(65536))  # read as a client does
        try:
            writer.write(head.encode() + (b"[" if kind != 1 else b"1\r\n[\r\n"))
            sent = 1
            while sent < size - len(block) - 2 and not answered.done():
                piece = block if kind != 1 else b"%x\r\n%s\r\n" % (len(block), block)
                writer.write(piece)
                await writer.drain()
                sent += len(block)
            if not answered.done():
                writer.write(b"{}]" if kind != 1 else b"3\r\n{}]\r\n0\r\n\r\n")
                await writer.drain()
        except ConnectionError:
            pass
        try:
            answer = await asyncio.wait_for(answered, 60)
        except (ConnectionError, TimeoutError):
            answer = b""
        status = answer[9:12].decode() or "reset"
        counts[status] = counts.get(status, 0) + 1
        writer.close()

    async def attacker(index: int) -> None:
        n = index
        while not stop.is_set():
            await one(kinds[n % len(kinds)])
            await asyncio.sleep(PAUSE)  # a client's retry, not a flood of connections
            n += 1

    async def run() -> None:
        tasks = [asyncio.create_task(attacker(i)) for i in range(ATTACKERS)]
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await asyncio.gather(*tasks, return_exceptions=True)

    print(json.dumps({"ready": True}), flush=True)
    asyncio.run(run())
    print(json.dumps(counts), flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["--flood"]:
    flood_child(sys.argv[2], sys.argv[3], [KINDS.index(k) for k in sys.argv[4].split(",")])
    sys.exit(0)
if __name__ == "__main__" and sys.argv[1:2] == ["--model"]:
    model_child(int(sys.argv[2]))
    sys.exit(0)

import h11  # noqa: E402
from benchkit import percentile  # noqa: E402


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Stream:
    """One keep-alive connection of the bench client, answers read with h11 on asyncio: a
    client light enough that, at 20 streams on two cores, it does not crowd out the gateway
    it measures (httpx in threads spent more per stream than the gateway itself)."""

    def __init__(self, url: str, key: str) -> None:
        self.host, port = url.removeprefix("http://").rsplit(":", 1)
        self.port = int(port)
        payload = json.dumps(BODY).encode()
        self.request = h11.Request(
            method="POST",
            target="/v1/messages",
            headers=[
                ("host", url.removeprefix("http://")),
                ("x-api-key", key),
                ("content-type", "application/json"),
                ("content-length", str(len(payload))),
            ],
        )
        self.payload = payload
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.conn = h11.Connection(h11.CLIENT)

    async def one(self) -> tuple[float, float]:
        """(time to first byte, whole stream) of one streamed answer."""
        start = time.perf_counter()
        if self.reader is None or self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        conn = self.conn
        self.writer.write(
            conn.send(self.request)
            + conn.send(h11.Data(data=self.payload))
            + conn.send(h11.EndOfMessage())
        )
        first, status = 0.0, 0
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await self.reader.read(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                if not first:
                    first = time.perf_counter() - start
            elif isinstance(event, h11.EndOfMessage):
                break
            else:
                raise AssertionError(f"the connection ended mid-answer: {event!r}")
        assert status == 200, status
        conn.start_next_cycle()
        return first, time.perf_counter() - start

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def run(
    direct: str, gateway: str, tokens: list[str], streams: int, requests: int, think: float
) -> dict:
    """Each of `streams` concurrent clients alternates direct and gateway requests, each
    request after a pause of `think` seconds on average (random, the same every run)."""
    return asyncio.run(_run(direct, gateway, tokens, streams, requests, think))


async def _run(
    direct: str, gateway: str, tokens: list[str], streams: int, requests: int, think: float
) -> dict:
    results: dict[str, list[tuple[float, float]]] = {"direct": [], "gateway": []}
    barrier = asyncio.Barrier(streams)

    async def worker(index: int) -> None:
        pair = [("direct", Stream(direct, "k")), ("gateway", Stream(gateway, tokens[index]))]
        pauses = random.Random(index)
        try:
            for _, stream in pair:  # warm both connections
                await stream.one()
            await barrier.wait()
            for n in range(requests):
                for name, stream in pair if n % 2 else reversed(pair):
                    if think:
                        await asyncio.sleep(pauses.uniform(0, 2 * think))
                    results[name].append(await stream.one())
        finally:
            for _, stream in pair:
                stream.close()

    await asyncio.gather(*(worker(i) for i in range(streams)))
    return results


def report(label: str, results: dict) -> bool:
    ok = True
    for index, what in ((0, "first byte"), (1, "whole stream")):
        direct = [t[index] for t in results["direct"]]
        through = [t[index] for t in results["gateway"]]
        p50 = percentile(through, 0.5) - percentile(direct, 0.5)
        p99 = percentile(through, 0.99) - percentile(direct, 0.99)
        print(
            f"{label}, {what}: direct p50 {percentile(direct, 0.5) * 1000:.2f} ms "
            f"p99 {percentile(direct, 0.99) * 1000:.2f} ms; gateway p50 "
            f"{percentile(through, 0.5) * 1000:.2f} ms p99 {percentile(through, 0.99) * 1000:.2f}"
            f" ms; added p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms ({len(through)} streams)"
        )
        ok = ok and p50 <= ADDED_P50 and p99 <= ADDED_P99
    return ok


@contextmanager
def child_process(*args: str) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """This script as a child (`--model`, `--child …`) and the JSON line it prints first."""
    proc = subprocess.Popen(
        [sys.executable, __file__, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert proc.stdout is not None
        yield proc, json.loads(proc.stdout.readline())
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=30)


def small_requests(direct: str, url: str, token: str, seconds: float) -> dict[str, list[float]]:
    """Whole-answer times of one session's small requests, through the gateway and straight to
    the scripted model in turn (the machine's own delays show in both), one every 10 ms or
    so, for `seconds`."""

    async def go() -> dict[str, list[float]]:
        streams = {"direct": Stream(direct, "k"), "gateway": Stream(url, token)}
        times: dict[str, list[float]] = {"direct": [], "gateway": []}
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                for name, stream in streams.items():
                    await asyncio.sleep(0.01)
                    times[name].append((await stream.one())[1])
        finally:
            for stream in streams.values():
                stream.close()
        return times

    return asyncio.run(go())


def flood(seconds: float, kinds: str) -> bool:
    """Small requests of one session while another floods the gateway with large bodies of
    `kinds` (`announced`: 60 MiB, its length given; `chunked`: 60 MiB in chunks; `within`:
    30 MiB, its length given, too many values)."""
    with (
        child_process("--model", "0") as (_, model),
        child_process("--child", model["url"], "2") as (proc, gateway),
    ):
        url, (small, hostile) = gateway["url"], gateway["tokens"]
        idle = rss_mb(proc.pid)
        quiet = small_requests(model["url"], url, small, min(seconds, 5.0))
        peak = [idle]
        with child_process("--flood", url, hostile, kinds) as (flooder, _):
            import threading

            done = threading.Event()

            def sample() -> None:
                while not done.wait(0.05):
                    peak[0] = max(peak[0], rss_mb(proc.pid))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            busy = small_requests(model["url"], url, small, seconds)
            done.set()
            assert flooder.stdin is not None and flooder.stdout is not None
            flooder.stdin.close()
            flooder.stdin = None
            counts = json.loads(flooder.stdout.readline())
        after = rss_mb(proc.pid)
    for label, measured in (("alone", quiet), ("during the flood", busy)):
        for name, times in measured.items():
            print(
                f"small requests {label}, {name}: p50 {percentile(times, 0.5) * 1000:.2f} ms, "
                f"p99 {percentile(times, 0.99) * 1000:.2f} ms, max {max(times) * 1000:.2f} ms "
                f"({len(times)} requests)"
            )
    print(f"large bodies ({kinds}) answered: {counts} (413: too large, 403: too many values)")
    print(f"gateway RSS: {idle:.1f} MB before, {peak[0]:.1f} MB at most, {after:.1f} MB after")
    ok = percentile(busy["gateway"], 0.99) <= FLOOD_P99
    print(f"target p99 ≤ {FLOOD_P99 * 1000:.0f} ms during the flood: {'met' if ok else 'MISSED'}")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200, help="per stream, alone")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument(
        "--deltas",
        type=int,
        default=0,
        help="stream each answer's text as this many deltas, event by event (0: one write)",
    )
    parser.add_argument(
        "--think",
        type=float,
        default=40.0,
        help="ms each concurrent stream pauses before a request, on average",
    )
    parser.add_argument("--scenario", choices=("streams", "flood", "all"), default="all")
    parser.add_argument("--flood-seconds", type=float, default=20.0)
    parser.add_argument(
        "--flood-kinds",
        default="announced",
        help=f"the large bodies the flood sends, comma-separated, of {', '.join(KINDS)}",
    )
    args = parser.parse_args()
    flooded = True
    if args.scenario != "streams":
        flooded = flood(args.flood_seconds, args.flood_kinds)
        if args.scenario == "flood":
            return 0 if flooded else 1
    with (
        child_process("--model", str(args.deltas)) as (modeller, model),
        child_process("--child", model["url"], str(args.concurrency)) as (proc, gateway),
    ):
        idle = rss_mb(proc.pid)
        cpu = cpu_seconds(proc.pid)
        direct, url, tokens = model["url"], gateway["url"], gateway["tokens"]
        alone = run(direct, url, tokens, 1, args.requests, 0.0)
        before = [sum(cpu_seconds(modeller.pid)), sum(os.times()[:2]), sum(cpu_seconds(proc.pid))]
        together = run(
            direct, url, tokens, args.concurrency, args.requests // 10 or 1, args.think / 1000
        )
        after = [sum(cpu_seconds(modeller.pid)), sum(os.times()[:2]), sum(cpu_seconds(proc.pid))]
        user, system = (b - a for a, b in zip(cpu, cpu_seconds(proc.pid), strict=True))
        busy = rss_mb(proc.pid)
        relayed = len(alone["gateway"]) + len(together["gateway"]) + args.concurrency + 1
    ok = report("1 stream", alone)
    ok = report(f"{args.concurrency} streams at once", together) and ok
    print(f"gateway RSS: {idle:.1f} MB started, {busy:.1f} MB after the runs")
    per = 1000 / relayed
    print(
        f"gateway CPU per relayed stream: {user * per:.2f} ms user + {system * per:.2f} ms "
        f"system ({relayed} streams)"
    )
    # With the cores all busy, a heavy client or model would crowd the gateway out: what each
    # process spent per stream of the concurrent run shows whether the gateway was the one.
    streams = len(together["direct"]) + len(together["gateway"])
    model_ms, client_ms, gateway_ms = ((b - a) * 1000 for a, b in zip(before, after, strict=True))
    print(
        f"{args.concurrency} streams at once, CPU per stream: scripted model "
        f"{model_ms / streams:.2f} ms, bench client {client_ms / streams:.2f} ms, gateway "
        f"{gateway_ms / len(together['gateway']):.2f} ms per relayed stream"
    )
    ok = ok and busy <= RSS_MB
    targets = f"added p50 ≤ {ADDED_P50 * 1000:.0f} ms, p99 ≤ {ADDED_P99 * 1000:.0f} ms"
    print(f"targets {targets}, RSS ≤ {RSS_MB:.0f} MB: {'met' if ok else 'MISSED'}")
    return 0 if ok and flooded else 1


if __name__ == "__main__":
    sys.exit(main())
