"""A credential route's server: one session's HTTP/1.1 connection in (through its closed
network's relay, `netgates`), the route's upstream out, with the operator's credential added
on the way (`routerules`).

Requests are read by httptools (`gateway/framing.py`: a head past `MAX_HEAD`, or one HTTP/1.1
does not allow, closes the connection), checked against the route's `allow` rules (a refusal
is a 403 whose body says which rule set refused it), and sent upstream on one connection per
session connection, kept alive while both ends allow. Bodies stream both ways piece by piece,
never held whole: a request's as it arrives (re-chunked when it came chunked), an answer's
as it is read, scrubbed of the route's secrets. The route never follows a redirect. An
upstream that cannot be reached before the answer began is a 502 naming the route; one that
breaks off mid-answer closes the session's connection.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Callable
from typing import Any

from app.gateway import (
    CONTINUE,
    END,
    LAST_CHUNK,
    AnswerFraming,
    AnswerHead,
    FramingError,
    RequestHead,
    SessionRequests,
    UpstreamAnswers,
    request_bytes,
    status_head,
)
from app.spawner.network.routecreds import ResolvedRoute
from app.spawner.network.routerules import (
    Scrubber,
    incoming_headers,
    outgoing_headers,
    refusal,
)
from app.spawner.spawner_errors import SpawnerError

log = logging.getLogger(__name__)

MAX_HEAD = 64 * 1024  # a request's or an answer's head
READ_SIZE = 64 * 1024
HEAD_WAIT = 30.0  # a new connection's first request head
IDLE = 900.0  # a session connection silent between or within requests
CONNECT = 15.0
UPSTREAM_READ = 600.0
Counted = Callable[[bool], None]  # one request: refused or passed


class SessionGone(SpawnerError, ConnectionError):
    """The session closed its connection inside a request."""


ERRORS = (FramingError, ConnectionError, TimeoutError, OSError, ssl.SSLError)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The devbox's own trust store (an upstream may be signed by a private CA the devbox
    trusts), HTTP/1.1 only."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    return context


class _Far:
    """The upstream connection and the answers read on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.answers = UpstreamAnswers(MAX_HEAD)

    async def next(self) -> AnswerHead | bytes | object | None:
        while (found := self.answers.next()) is None:
            async with asyncio.timeout(UPSTREAM_READ):
                data = await self.reader.read(READ_SIZE)
            if not data:
                return None
            self.answers.feed(data)
        return found

    def reusable(self) -> bool:
        answers = self.answers
        return not (self.reader.at_eof() or answers.found or answers.failure or answers.midway)

    def close(self) -> None:
        self.writer.close()


class RouteServer:
    """Serves one route to one session: `here` is the loopback origin the session names it
    by, `counted` is told of every request."""

    def __init__(self, route: ResolvedRoute, here: str, counted: Counted) -> None:
        self.route, self.here, self.counted = route, here, counted

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        exchange = _Exchange(self, reader, writer)
        try:
            await exchange.serve()
        except (*ERRORS, asyncio.CancelledError):
            pass
        finally:
            exchange.close()


class _Exchange:
    def __init__(
        self, server: RouteServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server, self.route = server, server.route
        self.reader, self.writer = reader, writer
        self.requests = SessionRequests(MAX_HEAD)
        self.far: _Far | None = None
        self.answering = False

    def close(self) -> None:
        if self.far is not None:
            self.far.close()
        self.writer.close()

    async def _fill(self) -> None:
        async with asyncio.timeout(IDLE):
            data = await self.reader.read(READ_SIZE)
        if not data:
            raise SessionGone("the session closed its connection")
        self.requests.feed(data)

    async def _head(self, wait: float) -> RequestHead | None:
        async with asyncio.timeout(wait):
            while (found := self.requests.next()) is None:
                data = await self.reader.read(READ_SIZE)
                if not data:
                    return None
                self.requests.feed(data)
        if not isinstance(found, RequestHead):
            raise FramingError("a request's body before its head")
        return found

    async def write(self, data: bytes) -> None:
        if data:
            self.answering = True
            self.writer.write(data)
            await self.writer.drain()

    async def answer(self, status: int, text: str) -> None:
        body = (text + "\n").encode()
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", b"%d" % len(body)),
            (b"connection", b"close"),
        ]
        await self.write(status_head(status, headers) + body)

    async def serve(self) -> None:
        wait = HEAD_WAIT
        while (head := await self._head(wait)) is not None:
            wait = IDLE
            method = head.method.decode("latin-1")
            why = refusal(self.route, method, head.target.decode("latin-1"))
            self.server.counted(why is not None)
            if why is not None:
                log.info("%s", why)
                await self.answer(403, why)
                return
            if not await self._forward(head, method):
                return

    async def _connect(self) -> _Far:
        if self.far is not None and self.far.reusable():
            return self.far
        if self.far is not None:
            self.far.close()
        origin = self.route.upstream.origin[0]
        context = tls_context() if origin.scheme == "https" else None
        async with asyncio.timeout(CONNECT):
            reader, writer = await asyncio.open_connection(
                origin.host,
                origin.port,
                ssl=context,
                server_hostname=origin.host if context else None,
            )
        self.far = _Far(reader, writer)
        return self.far

    async def _forward(self, head: RequestHead, method: str) -> bool:
        """Send one request upstream and relay its answer; whether the connection goes on."""
        try:
            far = await self._connect()
            if head.expects_continue and not self.requests.found:
                self.writer.write(CONTINUE)
            headers = outgoing_headers(head.headers, self.route)
            far.writer.write(request_bytes(head.method, head.target, headers))
            await self._send_body(far, any(n == b"transfer-encoding" for n, _ in headers))
            answer = await self._answer_head(far)
        except (TimeoutError, OSError, ssl.SSLError, FramingError) as exc:
            if isinstance(exc, SessionGone) or self.requests.failure is not None:
                raise  # the session's side failed: its connection closes, nothing to say
            log.warning("route %s: upstream failed: %r", self.route.env, exc)
            if self.far is not None:
                self.far.close()
                self.far = None
            why = f"the-loop route {self.route.env}: the upstream could not be reached"
            await self.answer(502, f"{why} ({exc.__class__.__name__})")
            return False
        return await self._relay(far, answer, head, method)

    async def _send_body(self, far: _Far, chunked: bool) -> None:
        while (piece := self.requests.next()) is not END:
            if piece is None:
                await far.writer.drain()
                await self._fill()
                continue
            if not isinstance(piece, bytes):
                raise FramingError("a request's head inside another's body")
            far.writer.write(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked else piece)
        if chunked:
            far.writer.write(LAST_CHUNK)
        await far.writer.drain()

    async def _answer_head(self, far: _Far) -> AnswerHead:
        while True:
            found = await far.next()
            if found is None:
                raise ConnectionResetError("the upstream closed without answering")
            if isinstance(found, AnswerHead) and found.status >= 200:
                return found
            if isinstance(found, AnswerHead) and found.status == 101:
                raise FramingError("the upstream switched protocols")

    async def _relay(self, far: _Far, answer: AnswerHead, head: RequestHead, method: str) -> bool:
        headers = incoming_headers(answer.headers, self.route, self.server.here)
        http11 = head.http_version == b"1.1"
        if method == "HEAD":  # no body follows, whatever its length says
            framing = AnswerFraming(answer.status, headers, 0, http11=http11, keep_alive=False)
            await self.write(framing.head)
            return False
        framing = AnswerFraming(
            answer.status, headers, answer.length, http11=http11, keep_alive=head.keep_alive
        )
        scrubber = Scrubber(self.route.secrets)
        await self.write(framing.head)
        while (found := await far.next()) is not END:
            if isinstance(found, bytes):
                await self.write(framing.body(scrubber.feed(found)))
            elif found is None and answer.until_close:
                break
            else:
                raise ConnectionResetError("the upstream broke off its answer")
        await self.write(framing.body(scrubber.end()) + framing.end)
        if not (answer.keep_alive and far.reusable()):
            far.close()
            self.far = None
        return framing.keep_alive


def serve_route(route: ResolvedRoute, port: int, counted: Counted) -> Any:
    """The handler `netgates` serves `route`'s socket with, for a session that names it at
    127.0.0.1:`port`."""
    return RouteServer(route, f"http://127.0.0.1:{port}", counted)
