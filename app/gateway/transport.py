"""The model gateway's upstream client: HTTP/1.1 over asyncio's streams, its answers read by
httptools (`framing.py`), with a small pool of kept-alive connections per origin.

The gateway sends one kind of request to one or two origins from one event loop it owns, so
it needs little of a general client: no proxies, no HTTP/2, no cancel scopes or event-loop
detection per call (httpcore's pool does each of these on every request, and they were most
of what a relayed stream cost the gateway: `bench/gateway.py` prints it). What it keeps of
httpcore's pool: a connection is reused only when its last exchange ended cleanly and its
server has not closed it; a failed connect is tried once more; connect, read, write and
pool waits each have their own timeout; TLS checks the certificate against certifi's roots
(or the context given) and offers only HTTP/1.1. Failures are `UpstreamError`s whose class
names say what failed (`ConnectError`, `ReadTimeout`, ...), as the 502 tells the session.
A request's head and body leave in one write; an answer's body is read as it comes, each
piece within the read timeout.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import certifi

from app.gateway.framing import (
    END,
    AnswerHead,
    FramingError,
    MessageEnd,
    UpstreamAnswers,
    request_bytes,
)
from app.gateway.gateway_errors import GatewayError

READ_SIZE = 64 * 1024
MAX_HEAD = 100 * 1024  # an answer's head (and a chunked body's trailer) may be this large
SOCKET_ERRORS = (OSError, ConnectionError, ssl.SSLError)
Headers = list[tuple[bytes, bytes]]


class UpstreamError(GatewayError):
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
    """One upstream connection and the answers read on it; `idle` while no exchange is on
    it or after one ended cleanly on a connection its server keeps alive."""

    def __init__(
        self, origin: UpstreamOrigin, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.origin, self.reader, self.writer = origin, reader, writer
        self.answers = UpstreamAnswers(MAX_HEAD)
        self.idle = True

    def reusable(self) -> bool:
        """Idle, not closed by its server, and nothing came on it past the last answer."""
        answers = self.answers
        return (
            self.idle
            and not self.reader.at_eof()
            and not answers.found
            and answers.failure is None
            and not answers.midway
        )

    async def next(self, timeout: float) -> AnswerHead | bytes | MessageEnd | None:
        """What the answers read on it give next (a head, a piece of a body, `END`), reading
        as needed, each read within `timeout`; None when the server closed the connection
        first. What HTTP/1.1 does not allow is a `FramingError`."""
        while (found := self.answers.next()) is None:
            async with asyncio.timeout(timeout):
                data = await self.reader.read(READ_SIZE)
            if not data:
                return None
            self.answers.feed(data)
        return found

    def close(self) -> None:
        self.idle = False
        self.writer.close()


@contextmanager
def reading_upstream() -> Iterator[None]:
    """What reading an upstream answer can raise, as the `UpstreamError` that says so."""
    try:
        yield
    except TimeoutError as exc:
        raise ReadTimeout("reading from the upstream") from exc
    except FramingError as exc:
        raise RemoteProtocolError(f"the upstream's answer: {exc}") from exc
    except SOCKET_ERRORS as exc:
        raise ReadError(str(exc)) from exc


class UpstreamAnswer:
    """An upstream answer: its status and headers at once, its body as it arrives
    (`chunks()`); `aclose()` gives the connection back to the pool when the answer was read
    to its end, or closes it."""

    def __init__(self, pool: UpstreamPool, connection: _Connection, head: AnswerHead) -> None:
        self.status, self.headers, self.length = head.status, head.headers, head.length
        self._head = head
        self._pool, self._connection = pool, connection
        self._closed = False

    async def chunks(self) -> AsyncIterator[bytes]:
        connection, timeout = self._connection, self._pool.timeouts.read
        with reading_upstream():
            while (found := await connection.next(timeout)) is not END:
                if isinstance(found, bytes):
                    yield found
                elif found is not None:
                    raise FramingError("an answer's head inside another's body")
                elif self._head.until_close:
                    break  # a body that ends with its connection
                else:
                    raise RemoteProtocolError("the upstream ended its answer early")
        connection.idle = self._head.keep_alive

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
            connection.idle = False
            await self._write(connection, request_bytes(method, target, headers) + body)
            while True:
                head = await self._head(connection)
                if head.status >= 200:
                    return UpstreamAnswer(self, connection, head)
                if head.status == 101:
                    raise RemoteProtocolError("the upstream switched protocols")
        except BaseException:
            self._discard(connection)
            raise

    def release(self, connection: _Connection) -> None:
        """An answer is done with `connection`: kept for the next request when its exchange
        ended cleanly and there is room, closed otherwise."""
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

    async def _head(self, connection: _Connection) -> AnswerHead:
        """The next head `connection` answers with (an interim `1xx` one's end passed over),
        read within the read timeout; the connection closing first or a head HTTP/1.1 does
        not allow is an `UpstreamError`."""
        with reading_upstream():
            while (found := await connection.next(self.timeouts.read)) is END:
                continue
        if found is None:
            raise RemoteProtocolError("the upstream closed the connection without answering")
        if not isinstance(found, AnswerHead):
            raise RemoteProtocolError("the upstream's answer: a body before its head")
        return found


@functools.cache
def default_context() -> ssl.SSLContext:
    """Certificates checked against certifi's roots (as httpx's clients do), HTTP/1.1 only."""
    context = ssl.create_default_context(cafile=certifi.where())
    context.set_alpn_protocols(["http/1.1"])
    return context
