#!/usr/bin/env python3
"""What a session's egress path costs a large download: the time to fetch a `--mb` MB
(default 32) body from a loopback HTTP server straight, and through the whole path a closed
network's session uses — the relay inside (`netrelay`, TCP to unix socket) and the
spawner's allow-listing proxy (`netgates`, a CONNECT tunnel) — alternating, `--rounds` times.

Twice: with the server sending as fast as loopback goes (the path's ceiling: two Python
hops against the kernel's copy, so far below "direct"), and with the server paced at
`--link` MB/s (default 119, a 1 Gbit/s link: what a registry download meets), which is the
figure the target is for.

The proxy runs in a process of its own (as in the spawner: one asyncio thread), so its
resident memory is its own: read before the first download and after the last, with its
peak (VmHWM). Targets: through the proxy ≥ 80 % of the direct throughput (medians); the
proxy's RSS flat (it grows by less than 8 MB over the run, whatever the body's size).
Usage: bench/proxy.py [--mb N] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RATIO, RSS_GROWTH_MB = 0.80, 8.0
CHUNK = 256 * 1024


def child(directory: str, port: int) -> None:
    """The proxy alone in this process (`--child DIR PORT`): serves one session whose egress
    is the loopback server, prints its pid, serves until stdin ends."""
    from app.spawner.network.netgates import SessionNetworks
    from app.spawner.network.netplan import NetPlan

    nets = SessionNetworks(Path(directory), lambda *a, **f: None)
    plan = NetPlan((), 3128, frozenset({("127.0.0.1", port)}), "http://127.0.0.1:9")
    path = nets.open("bench:proxy#1", plan)
    print(json.dumps({"dir": str(path), "pid": os.getpid()}), flush=True)
    sys.stdin.read()
    nets.stop()


def serve(size: int, link: list[float]) -> tuple[socket.socket, int]:
    """A loopback server answering every GET with `size` bytes, from one reused buffer, at
    most `link[0]` MB/s (0: unpaced)."""
    listener = socket.create_server(("127.0.0.1", 0))
    block = os.urandom(CHUNK)

    def one(conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                got = conn.recv(4096)
                if not got:
                    return
                head += got
            conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Length: {size}\r\n\r\n".encode())
            left, start, rate = size, time.perf_counter(), link[0] * 1024 * 1024
            while left:
                conn.sendall(block[: min(left, CHUNK)])
                left -= min(left, CHUNK)
                ahead = (size - left) / rate - (time.perf_counter() - start) if rate else 0
                if ahead > 0:
                    time.sleep(ahead)

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return listener, listener.getsockname()[1]


def fetch(port: int, size: int, tunnel_to: int | None = None) -> float:
    """Seconds to read the whole answer from 127.0.0.1:`port` (through a CONNECT to
    127.0.0.1:`tunnel_to` when given)."""
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        if tunnel_to is not None:
            conn.sendall(f"CONNECT 127.0.0.1:{tunnel_to} HTTP/1.1\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head
        conn.sendall(b"GET /big HTTP/1.1\r\nHost: bench\r\n\r\n")
        seen, buffer = 0, bytearray(CHUNK)
        while True:
            n = conn.recv_into(buffer)
            if not n:
                break
            seen += n
        assert seen > size, seen
    return time.perf_counter() - start


def memory(pid: int) -> dict[str, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--link", type=float, default=119.0)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return 0
    size = args.mb * 1024 * 1024
    link = [0.0]
    listener, port = serve(size, link)
    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    proxy = subprocess.Popen(
        [sys.executable, __file__, "--child", str(work / "net"), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proxy.stdout is not None
    opened = json.loads(proxy.stdout.readline())
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        inside = probe.getsockname()[1]
    relay_file = str(ROOT / "app" / "spawner" / "network" / "netrelay.py")
    relay = subprocess.Popen(
        [
            *(sys.executable, "-S", relay_file, "--dir", opened["dir"]),
            *("--route", f"127.0.0.1:{inside}=proxy.sock", "--", "sleep", "3600"),
        ]
    )
    deadline = time.monotonic() + 60
    while True:  # the relay listens before it starts its child
        try:
            socket.create_connection(("127.0.0.1", inside), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    runs: dict[float, tuple[list[float], list[float]]] = {}
    try:
        before = memory(opened["pid"])
        for rate in (0.0, args.link):
            link[0] = rate
            direct, proxied = runs.setdefault(rate, ([], []))
            for _ in range(args.rounds):
                direct.append(fetch(port, size))
                proxied.append(fetch(inside, size, tunnel_to=port))
        after = memory(opened["pid"])
    finally:
        relay.terminate()
        relay.wait()
        proxy.stdin.close()  # type: ignore[union-attr]
        proxy.wait()
        listener.close()
    mb = size / 1024 / 1024
    growth = after["VmRSS"] - before["VmRSS"]
    print(f"body {mb:.0f} MB, {args.rounds} rounds each (medians)")
    ratio = 0.0
    for rate, (direct, proxied) in runs.items():
        d, p = mb / statistics.median(direct), mb / statistics.median(proxied)
        ratio = p / d
        title = f"server paced at {rate:g} MB/s" if rate else "server unpaced (ceiling)"
        print(f"{title}: direct {d:8.1f} MB/s, relay + proxy {p:8.1f} MB/s ({ratio:.0%})")
    print(f"target: ≥ {RATIO:.0%} of direct at the paced link")
    print(
        f"proxy RSS:           {before['VmRSS']:.1f} MB → {after['VmRSS']:.1f} MB "
        f"(peak {after['VmHWM']:.1f} MB; growth {growth:+.1f} MB, target < {RSS_GROWTH_MB} MB)"
    )
    ok = ratio >= RATIO and growth < RSS_GROWTH_MB
    print("PASS" if ok else "MISS")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
