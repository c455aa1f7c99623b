"""The model gateway's upstream client: HTTP/1.1 by h11 (the sans-IO parser httpcore itself is
built on) over asyncio's streams, with a small pool of kept-alive connections per origin.

The gateway sends one kind of request to one or two origins from one event loop it owns, so
it needs little of a general client: no proxies, no HTTP/2, no cancel scopes or event-loop
detection per call (httpcore's pool does each of these on every request, and they were most
of what a relayed stream cost the gateway: `bench/gateway` prints it). What it keeps of
httpcore's pool: a connection is reused only when its last exchange ended cleanly and its
server has not closed it; a failed connect is tried once more; connect, read, write and
pool waits each have their own timeout; TLS checks the certificate against certifi's roots
(or the context given) and offers only HTTP/1.1. Failures are `UpstreamError`s whose class
names say what failed (`ConnectError`, `ReadTimeout`, ...), as the 502 tells the session.
A request's head and body leave in one write.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass

import certifi
import h11

READ_SIZE = 64 * 1024
MAX_HEAD = 100 * 1024  # an answer's head may be this large
SOCKET_ERRORS = (OSError, ConnectionError, asyncio.IncompleteReadError, ssl.SSLError)
Headers = list[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The upstream could not be reached, or broke the exchange off."""


class ConnectError(UpstreamError):
    pass


class ConnectTimeout(UpstreamError):
    pass


class ReadError(UpstreamError):
    pass


class ReadTimeout(UpstreamError):
    pass


class WriteError(UpstreamError):
    pass


class WriteTimeout(UpstreamError):
    pass


class PoolTimeout(UpstreamError):
    pass


class RemoteProtocolError(UpstreamError):
    pass


class UnsupportedProtocol(UpstreamError):
    pass


@dataclass(frozen=True)
class Timeouts:
    """Seconds each wait may take: opening a connection, one read, one write, a free slot."""

    connect: float = 15.0
    read: float = 600.0
    write: float = 60.0
    pool: float = 60.0


@dataclass(frozen=True)
class UpstreamOrigin:
    """Where connections go: scheme (`http` or `https`), host and port."""

    scheme: str
    host: str
    port: int


class _Connection:
    """One upstream connection and its HTTP/1.1 state."""

    def __init__(
        self, origin: UpstreamOrigin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.origin, self.reader, self.writer = origin, reader, writer
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)

    def reusable(self) -> bool:
        return self.h11.our_state is h11.IDLE and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class UpstreamAnswer:
    """An upstream answer: its status and headers at once, its body as it arrives
    (`chunks()`); `aclose()` gives the connection back to the pool when the answer was read
    to its end, or closes it."""

    def __init__(
        self, pool: UpstreamPool, connection: _Connection, status: int, headers: Headers
    ) -> None:
        self.status, self.headers = status, headers
        self._pool, self._connection = pool, connection
        self._closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            event = await self._pool.next_event(connection)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return
            else:
                raise RemoteProtocolError(f"the upstream ended its answer early ({event!r})")

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._pool.release(self._connection)


class UpstreamPool:
    """Kept-alive upstream connections, `max_connections` in use at once (a request waits up
    to `timeouts.pool` for one), up to `max_idle` kept open between requests."""

    def __init__(
        self,
        *,
        max_connections: int = 200,
        max_idle: int = 40,
        timeouts: Timeouts = Timeouts(),
        ssl_context: ssl.SSLContext | None = None,
        retries: int = 1,
    ) -> None:
        self.timeouts, self.retries, self.max_idle = timeouts, retries, max_idle
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._ssl = ssl_context
        self.opened = 0  # connections opened so far

    async def __aenter__(self) -> UpstreamPool:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    @property
    def idle(self) -> int:
        return len(self._idle)

    async def request(
        self, origin: UpstreamOrigin, method: bytes, target: bytes, headers: Headers, body: bytes
    ) -> UpstreamAnswer:
        """Send one request (its `Host` among `headers`) and read the answer's head."""
        if self._slots.locked():  # only a wait for a free slot needs its timer
            try:
                async with asyncio.timeout(self.timeouts.pool):
                    await self._slots.acquire()
            except TimeoutError as exc:
                raise PoolTimeout("no upstream connection came free") from exc
        else:
            await self._slots.acquire()
        try:
            connection = self._reused(origin) or await self._open(origin)
        except BaseException:
            self._slots.release()
            raise
        try:
            state = connection.h11
            data = state.send(h11.Request(method=method, target=target, headers=headers))
            data += state.send(h11.Data(data=body)) if body else b""
            data += state.send(h11.EndOfMessage()) or b""
            await self._write(connection, data)
            while True:
                event = await self.next_event(connection)
                if isinstance(event, h11.Response):
                    return UpstreamAnswer(
                        self, connection, event.status_code, list(event.headers.raw_items())
                    )
                if not isinstance(event, h11.InformationalResponse):
                    raise RemoteProtocolError(f"the upstream answered no response ({event!r})")
        except BaseException as exc:
            self._discard(connection)
            if isinstance(exc, h11.ProtocolError):
                raise RemoteProtocolError(str(exc)) from exc
            raise

    def release(self, connection: _Connection) -> None:
        """An answer is done with `connection`: kept for the next request when its exchange
        ended cleanly and there is room, closed otherwise."""
        state = connection.h11
        if state.our_state is h11.DONE and state.their_state is h11.DONE:
            state.start_next_cycle()
        if connection.reusable() and len(self._idle) < self.max_idle:
            self._idle.append(connection)
        else:
            connection.close()
        self._slots.release()

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        self._slots.release()

    def _reused(self, origin: UpstreamOrigin) -> _Connection | None:
        while True:
            found = next((c for c in reversed(self._idle) if c.origin == origin), None)
            if found is None:
                return None
            self._idle.remove(found)
            if found.reusable():  # else its server closed it while it idled
                return found
            found.close()

    async def _open(self, origin: UpstreamOrigin) -> _Connection:
        context = None
        if origin.scheme == "https":
            context = self._ssl or default_context()
        for attempt in range(self.retries + 1):
            try:
                async with asyncio.timeout(self.timeouts.connect):
                    reader, writer = await asyncio.open_connection(
                        origin.host,
                        origin.port,
                        ssl=context,
                        server_hostname=origin.host if context else None,
                        limit=READ_SIZE,
                    )
            except TimeoutError as exc:
                if attempt == self.retries:
                    raise ConnectTimeout(f"{origin.host}:{origin.port}") from exc
            except SOCKET_ERRORS as exc:
                if attempt == self.retries:
                    raise ConnectError(f"{origin.host}:{origin.port}: {exc}") from exc
            else:
                self.opened += 1
                return _Connection(origin, reader, writer)
        raise AssertionError("unreachable")

    async def _write(self, connection: _Connection, data: bytes) -> None:
        writer = connection.writer
        try:
            writer.write(data)
            if not writer.transport.get_write_buffer_size():
                await writer.drain()  # the socket took it all: nothing to wait for
                return
            async with asyncio.timeout(self.timeouts.write):
                await writer.drain()
        except TimeoutError as exc:
            raise WriteTimeout("writing to the upstream") from exc
        except SOCKET_ERRORS as exc:
            raise WriteError(str(exc)) from exc

    async def next_event(self, connection: _Connection) -> object:
        """The next event of `connection`'s answer, reading (within the read timeout) as
        needed; the connection closing or speaking nonsense is an `UpstreamError`."""
        state = connection.h11
        try:
            while True:
                event = state.next_event()
                if event is not h11.NEED_DATA:
                    if event is h11.PAUSED:
                        raise RemoteProtocolError("the upstream sent more than one answer")
                    return event
                try:
                    async with asyncio.timeout(self.timeouts.read):
                        data = await connection.reader.read(READ_SIZE)
                except TimeoutError as exc:
                    raise ReadTimeout("reading from the upstream") from exc
                except SOCKET_ERRORS as exc:
                    raise ReadError(str(exc)) from exc
                state.receive_data(data)
        except h11.ProtocolError as exc:
            raise RemoteProtocolError(str(exc)) from exc


@functools.cache
def default_context() -> ssl.SSLContext:
    """Certificates checked against certifi's roots (as httpx's clients do), HTTP/1.1 only."""
    context = ssl.create_default_context(cafile=certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context
