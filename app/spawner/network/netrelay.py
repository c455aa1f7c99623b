"""The relay inside a session's network namespace: the first process the sandbox runs.

`python -S netrelay.py --dir D --route HOST:PORT=SOCKET … -- argv…` listens on every
`HOST:PORT` of the namespace's own loopback (`localhost` means 127.0.0.1 and ::1), then runs
`argv` (the harness) as its child on the same terminal, and hands each connection to the
unix socket `D/SOCKET`, which the spawner serves on the host. Listening comes first, so the
harness never starts before its way out exists: a connection it makes before the relay
serves waits in the socket's backlog. The relay ends with the harness's exit status; it
ignores the terminal's interrupt (the harness answers Ctrl-C itself) and passes a hang-up or
a termination on to it.

Standard library only and started with `-S`: it runs on every launch, inside the sandbox.
The harness is started before asyncio is imported (importing it takes several times longer
than binding the sockets), so the harness's own start-up overlaps it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

CHUNK = 256 * 1024
# A stream's buffer: large enough that a download moves in big reads, not 64 KiB ones.
BUFFER = 4 * CHUNK


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    other_reader: asyncio.StreamReader,
    other_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides are done, then close both."""
    import asyncio

    try:
        await asyncio.gather(_pipe(reader, other_writer), _pipe(other_reader, writer))
    finally:
        for w in (writer, other_writer):
            w.close()


def _handler(path: str) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    import asyncio

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            far_reader, far_writer = await asyncio.open_unix_connection(path, limit=BUFFER)
        except OSError:
            writer.close()
            return
        await splice(reader, writer, far_reader, far_writer)

    return handle


def parse_routes(words: Sequence[str]) -> tuple[str, list[tuple[str, int, str]], list[str]]:
    """(socket directory, [(host, port, socket name)], the child's argv) from the argv."""
    words = list(words)
    if "--" not in words:
        raise SystemExit("netrelay: the harness's argv follows `--`")
    cut = words.index("--")
    head, child = words[:cut], words[cut + 1 :]
    directory, routes = "", []
    for flag, value in zip(head[::2], head[1::2], strict=True):
        if flag == "--dir":
            directory = value
        elif flag == "--route":
            address, _, name = value.rpartition("=")
            if address.startswith("/"):  # a unix socket's path
                routes.append((address, 0, name))
                continue
            host, _, port = address.rpartition(":")
            routes.append((host, int(port), name))
    if not directory or not child:
        raise SystemExit("netrelay: --dir and an argv are required")
    return directory, routes, child


def _bind(routes: list[tuple[str, int, str]]) -> list[tuple[socket.socket, str]]:
    """A listening socket for every route's address, with the unix socket it leads to (as
    asyncio's own server would bind it: the address reused, IPv6 only on IPv6)."""
    bound: list[tuple[socket.socket, str]] = []
    for host, port, name in routes:
        if host.startswith("/"):
            bound.append((_listening_unix(host), name))
            continue
        hosts = ["127.0.0.1", "::1"] if host == "localhost" else [host]
        for one in hosts:
            try:
                bound.append((_listening(one, port), name))
            except OSError:
                if one != "::1":  # a namespace without IPv6 still has 127.0.0.1
                    raise
    return bound


def _listening_unix(path: str) -> socket.socket:
    """A unix socket listening at `path` (its directory is the sandbox's own tmpfs)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(100)
    except OSError:
        sock.close()
        raise
    return sock


def _listening(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
        sock.listen(100)
    except OSError:
        sock.close()
        raise
    return sock


def main(argv: Sequence[str] | None = None) -> int:
    directory, routes, child = parse_routes(sys.argv[1:] if argv is None else argv)
    bound = _bind(routes)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(child)
    except OSError as exc:
        print(f"netrelay: cannot start {child[0]}: {exc}", file=sys.stderr)
        return 127

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    import asyncio
    import threading

    loop = asyncio.new_event_loop()
    servers = [
        loop.run_until_complete(
            asyncio.start_server(_handler(os.path.join(directory, name)), sock=sock, limit=BUFFER)
        )
        for sock, name in bound
    ]
    done = asyncio.Event()
    threading.Thread(
        target=lambda: (proc.wait(), loop.call_soon_threadsafe(done.set)), daemon=True
    ).start()
    loop.run_until_complete(done.wait())
    for server in servers:
        server.close()
    return proc.returncode if proc.returncode >= 0 else 128 - proc.returncode


if __name__ == "__main__":
    sys.exit(main())
