"""The host's side of sessions' closed networks: per session, one directory of unix sockets
the spawner serves, bound read-only into that session's sandbox (see `netplan`).

Each route's socket connects whatever arrives to its real address on the host (the model
gateway, a loopback App); `proxy.sock` is the session's allow-listing egress proxy: a
CONNECT or a plain-HTTP request only to a listed `host:port`, every refusal a
`session.egress_refused` event (a session that keeps knocking is folded into a count, so it
costs a counter, not an event a try). One asyncio loop in a thread of the spawner serves all
sessions. A session's directory is its spawner's (under the state directory, which no
session can write), removed with its sockets when the session ends; a relaunch or a
restarted spawner serves the same path again, so a live sandbox's bind stays good.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import shutil
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.spawner.network.netplan import (
    MAX_HEAD,
    PROXY_SOCKET,
    BadRequest,
    NetPlan,
    ProxyRequest,
    inward_address,
    needs_resolving,
    parse_proxy_head,
    permitted,
)
from app.spawner.network.netrelay import BUFFER, splice

log = logging.getLogger(__name__)

NETS = "net"  # under the spawner's state directory
REFUSED_EVENT = "session.egress_refused"
CONNECT_TIMEOUT = 15.0
HEAD_TIMEOUT = 30.0
MAX_CONNECTIONS = 256  # one session's connections open at once, over all its routes
# One route's (the model gateway's, the App's) connections open at once for one session: the
# far end serves every session, so one may not take what the others need.
ROUTE_CONNECTIONS = 16
REFUSALS_PER_MINUTE = 20  # events; past it, refusals are counted into the next one
SUN_PATH = 100  # a unix socket's path must stay under 108 bytes
Emit = Callable[..., Any]
# A socket served by a handler of the spawner's own (a credential route), not forwarded.
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def session_dir(root: Path, work_item_id: str) -> Path:
    """The session's socket directory on the host: short, so socket paths fit."""
    return root / hashlib.sha256(work_item_id.encode()).hexdigest()[:12]


def _bound(directory: Path, name: str) -> socket.socket:
    """A listening unix socket `directory/name` (through `/proc/self/fd` when the path is
    too long for a socket address)."""
    path = directory / name
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if len(os.fsencode(path)) < SUN_PATH:
        sock.bind(str(path))
    else:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            sock.bind(f"/proc/self/fd/{fd}/{name}")
        finally:
            os.close(fd)
    sock.listen(128)
    sock.setblocking(False)
    return sock


@dataclass
class _Session:
    work_item_id: str
    plan: NetPlan
    directory: Path
    servers: list[asyncio.Server] = field(default_factory=list)
    open: int = 0  # connections now
    dropped: int = 0  # connections closed unserved, past a cap (a count, never an event)
    refusals: list[float] = field(default_factory=list)  # when the last events were sent
    folded: int = 0  # refusals not sent as events since the last one
    allowed: set[tuple[str, int]] = field(default_factory=set)  # added while it runs


def _answer(writer: asyncio.StreamWriter, status: str, reason: str) -> None:
    body = (reason + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)


async def _cancel_the_rest() -> None:
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class SessionNetworks:
    """Every session's sockets, served by one loop thread (started on first use)."""

    def __init__(self, root: Path, emit: Emit) -> None:
        self.root = root
        self.emit = emit
        self._sessions: dict[str, _Session] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def _run(self, coro: Any) -> Any:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._thread = threading.Thread(
                    target=loop.run_forever, name="netgates", daemon=True
                )
                self._thread.start()
                self._loop = loop
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    def open(
        self, work_item_id: str, plan: NetPlan, served: Mapping[str, Handler] | None = None
    ) -> Path:
        """Serve `work_item_id`'s sockets for `plan` (replacing any it had); their directory.
        A route whose socket `served` names is answered by that handler, not forwarded."""
        return Path(self._run(self._open(work_item_id, plan, served or {})))

    def allow(self, work_item_id: str, host: str, port: int) -> bool:
        """Let `work_item_id`'s live session reach `host:port` from its next request on (the
        proxy reads the set on every request: no relaunch); False when it has no network
        served here. A relaunch plans afresh from the config (the App sends it again)."""
        if self._loop is None:
            return False
        return bool(self._run(self._allow(work_item_id, host, port)))

    async def _allow(self, work_item_id: str, host: str, port: int) -> bool:
        session = self._sessions.get(work_item_id)
        if session is None:
            return False
        session.allowed.add((host.strip("[]").lower().rstrip("."), port))
        return True

    def close(self, work_item_id: str) -> None:
        """Stop serving `work_item_id`'s sockets and remove their directory."""
        if self._loop is not None:
            self._run(self._close(work_item_id))

    def stop(self) -> None:
        """Stop serving (the spawner ends); the directories stay for the next spawner."""
        loop = self._loop
        if loop is None:
            return
        for item in list(self._sessions):
            self._run(self._close(item, remove=False))
        self._run(_cancel_the_rest())  # connections still open end here, not at collection
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=30)
        loop.close()
        self._loop = self._thread = None

    async def _open(self, work_item_id: str, plan: NetPlan, served: Mapping[str, Handler]) -> Path:
        before = self._sessions.get(work_item_id)
        await self._close(work_item_id, remove=False)
        directory = session_dir(self.root, work_item_id)
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        session = _Session(work_item_id, plan, directory)
        if before is not None:  # a relaunch keeps what people allowed this item
            session.allowed = before.allowed
        for route in plan.routes:
            handle = self._forwarder(session, route.host, route.far_port, served.get(route.socket))
            sock = _bound(directory, route.socket)
            server = await asyncio.start_unix_server(handle, sock=sock, limit=BUFFER)
            session.servers.append(server)
        proxy = self._proxy(session)
        sock = _bound(directory, PROXY_SOCKET)
        session.servers.append(await asyncio.start_unix_server(proxy, sock=sock, limit=BUFFER))
        self._sessions[work_item_id] = session
        return directory

    async def _close(self, work_item_id: str, *, remove: bool = True) -> None:
        session = self._sessions.pop(work_item_id, None)
        for server in session.servers if session else []:
            server.close()
        if remove:
            shutil.rmtree(session_dir(self.root, work_item_id), ignore_errors=True)

    def _admit(self, session: _Session, writer: asyncio.StreamWriter) -> bool:
        if session.open >= MAX_CONNECTIONS:
            session.dropped += 1
            writer.close()
            return False
        session.open += 1
        return True

    def _forwarder(
        self, session: _Session, host: str, port: int, served: Handler | None = None
    ) -> Any:
        here = [0]  # this route's connections open now

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if here[0] >= ROUTE_CONNECTIONS:
                session.dropped += 1
                writer.close()
                return
            if not self._admit(session, writer):
                return
            here[0] += 1
            try:
                if served is not None:
                    await served(reader, writer)
                else:
                    await self._relay(session, reader, writer, host, port)
            finally:
                here[0] -= 1
                session.open -= 1

        return handle

    async def _relay(
        self,
        session: _Session,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
    ) -> None:
        try:
            opening = (
                asyncio.open_unix_connection(host, limit=BUFFER)
                if host.startswith("/")  # a devbox service's unix socket
                else asyncio.open_connection(host, port, limit=BUFFER)
            )
            far = await asyncio.wait_for(opening, CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:  # the far end is down: the log says so
            log.warning("%s: %s:%s unreachable: %r", session.work_item_id, host, port, exc)
            writer.close()
            return
        except asyncio.CancelledError:  # the spawner ends
            writer.close()
            return
        try:
            await splice(reader, writer, *far)
        except (OSError, asyncio.CancelledError):
            writer.close()

    def _proxy(self, session: _Session) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if not self._admit(session, writer):
                return
            try:
                await self._one_request(session, reader, writer)
            except (
                OSError,
                TimeoutError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                asyncio.CancelledError,  # the spawner ends: the connection ends with it
            ):
                writer.close()
            finally:
                session.open -= 1

        return handle

    async def _one_request(
        self, session: _Session, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
            if len(head) > MAX_HEAD:  # the buffer is a download's; a head is kept short
                raise BadRequest(f"a request head is at most {MAX_HEAD} bytes")
            request = parse_proxy_head(head)
        except (BadRequest, ValueError) as exc:
            _answer(writer, "400 Bad Request", f"the-loop egress proxy: {exc}")
            writer.close()
            return
        allowed = session.plan.allowed | session.allowed
        if not permitted(allowed, request.host, request.port):
            self._refused(session, request.host, request.port, request.method)
            reason = (
                f"the-loop egress proxy: {request.host}:{request.port} is not in "
                "routing.sandbox.egress"
            )
            _answer(writer, "403 Forbidden", reason)
            writer.close()
            return
        try:
            address = await self._checked_address(session, request, writer)
            if address is None:
                writer.close()
                return
            opened = asyncio.open_connection(address, request.port, limit=BUFFER)
            far_reader, far_writer = await asyncio.wait_for(opened, CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            _answer(writer, "502 Bad Gateway", f"the-loop egress proxy: {exc}")
            writer.close()
            return
        if request.tunnel:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            far_writer.write(request.head)
        await splice(reader, writer, far_reader, far_writer)

    async def _checked_address(
        self, session: _Session, request: ProxyRequest, writer: asyncio.StreamWriter
    ) -> str | None:
        """The address to connect to for a listed host: a name is resolved here, once, and
        refused (403, an event saying why) when any of its addresses is loopback, private or
        otherwise not public; the connection then goes to the address checked, never to a
        second lookup's answer. An address the operator listed, or the App's own name,
        is used as it is."""
        if not needs_resolving(session.plan, request.host, request.port):
            return request.host
        loop = asyncio.get_running_loop()
        found = await asyncio.wait_for(
            loop.getaddrinfo(request.host, request.port, type=socket.SOCK_STREAM),
            CONNECT_TIMEOUT,
        )
        addresses = [str(info[4][0]) for info in found]
        inward = inward_address(addresses)
        if inward is None and addresses:
            return addresses[0]
        why = f"resolves to {inward}, not a public address" if inward else "resolves to nothing"
        self._refused(session, request.host, request.port, request.method, why)
        _answer(writer, "403 Forbidden", f"the-loop egress proxy: {request.host} {why}")
        return None

    def _refused(
        self,
        session: _Session,
        host: str,
        port: int,
        method: str,
        why: str = "not in routing.sandbox.egress",
    ) -> None:
        now = time.monotonic()
        session.refusals = [t for t in session.refusals if now - t < 60.0]
        if len(session.refusals) >= REFUSALS_PER_MINUTE:
            session.folded += 1
            return
        session.refusals.append(now)
        folded, session.folded = session.folded, 0
        log.info("egress refused for %s: %s:%s", session.work_item_id, host, port)
        self.emit(
            REFUSED_EVENT,
            session.work_item_id,
            level="warning",
            host=host[:255],
            port=port,
            method=method[:16],
            target=f"{host[:255]}:{port}",
            reason=why,
            folded=folded,
            harness_own=host in session.plan.quiet,
        )
