"""One session's HTTP/1.1 connection to the model gateway, request after request: the
request read (its head within the gateway's `head_wait`, its body up to the gateway's
`max_request_bytes` — a larger one refused 413 from its announced length, or as soon as its
chunks pass it, unread beyond that — and counted against the bodies in flight), the pass
checked and the connection attached to its holder, every refusal answered in the wire's own
error shape. What a request then becomes upstream is the gateway's (`relay.py`).

A request is read by httptools (`framing.py`), the connection's bytes fed to one parser as
they come: a head past `MAX_HEAD`, one that breaks HTTP/1.1's rules, a body that ends early
or a chunk that is not one closes the connection unanswered. The connection is kept for
another request (bytes sent past one are the next one's) unless the request was HTTP/1.0 or
asked to close, was refused, or its answer ends with the connection."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from app.gateway.forwarding import Upstream, presented_token
from app.gateway.framing import (
    CONTINUE,
    END,
    AnswerFraming,
    FramingError,
    Headers,
    RequestHead,
    SessionRequests,
    status_head,
)
from app.gateway.gateway_errors import GatewayError
from app.gateway.metering import Tally
from app.gateway.passes import Passes
from app.gateway.wires import MESSAGES, RESPONSES, Wire, not_forwarded, shape_for, wire_for

log = logging.getLogger(__name__)

IDLE = 900.0  # seconds a connection may stay silent, between requests or within one
OVERLOADED = "the model gateway holds too many large requests at once; retry shortly"
MAX_HEAD = 64 * 1024
READ_SIZE = 64 * 1024
UNKNOWN_PASS = (
    "this session's model credential is unknown or has expired (its session ended); the "
    "spawner gives a new one when it relaunches the session"
)
NO_CREDENTIAL = (
    "the devbox has no model credential to answer with: set ANTHROPIC_API_KEY for the "
    "spawner, or routing.sandbox.apiKeyFile (or shareLogin) in cli-config.yaml"
)
NO_OPENAI_CREDENTIAL = (
    "the devbox has no OpenAI credential to answer with: set OPENAI_API_KEY for the spawner, "
    "or routing.sandbox.openaiKeyFile in cli-config.yaml"
)
NO_CREDENTIAL_FOR = {MESSAGES.name: NO_CREDENTIAL, RESPONSES.name: NO_OPENAI_CREDENTIAL}
TOO_LARGE = (
    "the request body is larger than the model gateway forwards ({limit} bytes at most: "
    "routing.sandbox.gateway.maxRequestBytes in the operator's cli-config.yaml)"
)
TOO_MANY = "this session holds too many connections to the model gateway; retry on one of them"
NOT_FORWARDED = not_forwarded()
JSON = [(b"content-type", b"application/json")]


class GatewayRefusal(GatewayError):
    """A request the gateway answers itself, in the wire's own error shape."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message
        self.shape: Wire = MESSAGES  # whose error shape the refusal takes


class ExchangeGateway(Protocol):
    """What a connection asks of the gateway that accepted it (`relay.ModelGateway`): its
    bounds and counters, the passes and upstreams a request is checked against, and the
    steps that hold a body, judge it and send it on."""

    head_wait: float
    max_request_bytes: int
    dropped: int
    refusals: int
    passes: Passes
    upstreams: dict[str, Upstream]
    spent: dict[str, str]
    spent_refused: dict[str, int]
    tally: Tally

    def attach(self, exchange: SessionExchange, work_item_id: str) -> bool: ...

    def detach(self, exchange: SessionExchange) -> None: ...

    def hold(self, size: int) -> bool: ...

    def spent_refusals(self, work_item_id: str) -> int: ...

    async def check_reach(self, body: bytes, work_item_id: str, wire: Wire) -> None: ...

    async def forward(
        self,
        exchange: SessionExchange,
        request: RequestHead,
        body: bytes,
        work_item_id: str,
        wire: Wire,
    ) -> bool: ...


class SessionExchange:
    """One HTTP/1.1 connection from a session, request after request."""

    def __init__(self, gateway: ExchangeGateway, reader: Any, writer: Any) -> None:
        self.gateway = gateway
        self.reader = reader
        self.writer = writer
        self.requests = SessionRequests(MAX_HEAD)  # what the session sent, parsed
        self.holder: str | None = None  # the work item whose pass this connection presented
        self.http11 = True  # the request being answered is HTTP/1.1
        self.keep_alive = True  # the connection may serve another request after this one
        self.answering = False  # part of the answer went out

    async def _first(self) -> RequestHead | None:
        """The first request's head, within `head_wait` (a silent connection is dropped)."""
        try:
            async with asyncio.timeout(self.gateway.head_wait):
                return await self._head()
        except TimeoutError:
            self.gateway.dropped += 1
            raise

    async def _fill(self) -> bool:
        """Parse what the session sends next; False when it closed."""
        # A session that goes quiet mid-request, or idles for long, is hung up on.
        async with asyncio.timeout(IDLE):
            data = await self.reader.read(READ_SIZE)
        self.requests.feed(data)
        return bool(data)

    async def _head(self) -> RequestHead | None:
        """The next request's head; None when the session closed between requests."""
        while (found := self.requests.next()) is None:
            if not await self._fill():
                if self.requests.midway:
                    raise ConnectionError("the session left inside a request head")
                return None
        if not isinstance(found, RequestHead):
            raise FramingError("a request's body before its head")  # llhttp gives none
        return found

    async def write(self, data: bytes) -> None:
        """Send `data` (the answer's head, a piece of its body, its end), when there is any."""
        if data:
            self.answering = True
            self.writer.write(data)
            await self.writer.drain()

    def framing(self, status: int, headers: Headers, length: int | None) -> AnswerFraming:
        """How an answer with `headers` and a body of `length` bytes (None: unknown) goes
        to this session; an answer that ends with the connection keeps it from serving more."""
        framing = AnswerFraming(
            status, headers, length, http11=self.http11, keep_alive=self.keep_alive
        )
        self.keep_alive = framing.keep_alive
        return framing

    async def serve(self) -> None:
        try:
            request = await self._first()
            while request is not None:
                self.http11 = request.http_version == b"1.1"
                self.keep_alive = request.keep_alive
                self.answering = False
                await self._one(request)
                if not self.keep_alive:
                    return
                request = await self._head()
        except (FramingError, ConnectionError, TimeoutError):
            return
        finally:
            self.gateway.detach(self)
            self.writer.close()

    async def _body(self, held: list[int]) -> bytes:
        """The whole request body. What it holds is counted against the gateway's budget for
        bodies in flight (`held[0]`, given back by the caller), so many large requests at once
        are turned away rather than taking the spawner's memory."""
        parts: list[bytes] = []
        while (piece := self.requests.next()) is not END:
            if piece is None:
                if not await self._fill():
                    raise ConnectionError("the session left inside a request body")
                continue
            if not isinstance(piece, bytes):
                raise FramingError("a request's head inside another's body")  # llhttp gives none
            size = len(piece)
            if held[0] + size > self.gateway.max_request_bytes:
                raise self.too_large()
            if not self.gateway.hold(size):
                raise GatewayRefusal(529, "overloaded_error", OVERLOADED)
            held[0] += size
            parts.append(piece)
        return b"".join(parts)

    def too_large(self) -> GatewayRefusal:
        message = TOO_LARGE.format(limit=self.gateway.max_request_bytes)
        return GatewayRefusal(413, "request_too_large", message)

    def _announced(self, request: RequestHead) -> int:
        """The body's length its head gives (0 when none: chunks, or no body)."""
        given = next((v for n, v in request.headers if n == b"content-length"), b"0")
        return int(given)  # llhttp let one through, and only digits

    async def _one(self, request: RequestHead) -> None:
        wire = wire_for(request.method, request.target)
        try:
            work_item_id = self.gateway.passes.holder(presented_token(request.headers))
            if work_item_id is None:
                raise GatewayRefusal(401, "authentication_error", UNKNOWN_PASS)
            if not self.gateway.attach(self, work_item_id):
                raise GatewayRefusal(529, "overloaded_error", TOO_MANY)
            if wire is None:
                raise GatewayRefusal(403, "permission_error", NOT_FORWARDED)
            if not self.gateway.upstreams[wire.name].has_credential:
                raise GatewayRefusal(401, "authentication_error", NO_CREDENTIAL_FOR[wire.name])
            spent = self.gateway.spent.get(work_item_id)
            if spent is not None:
                self.gateway.spent_refused[work_item_id] = (
                    self.gateway.spent_refusals(work_item_id) + 1
                )
                raise GatewayRefusal(400, "invalid_request_error", spent)  # as a spent balance is
            if self._announced(request) > self.gateway.max_request_bytes:
                raise self.too_large()  # answered before a byte of the body is read
        except GatewayRefusal as refused:
            refused.shape = wire or shape_for(request.target)
            await self.refuse(refused)
            return
        held, tools = [0], False
        self.gateway.tally.started(work_item_id)
        try:
            if request.expects_continue and not self.requests.found:
                await self.write(CONTINUE)
                self.answering = False
            body = await self._body(held)
            await self.gateway.check_reach(body, work_item_id, wire)
            tools = await self.gateway.forward(self, request, body, work_item_id, wire)
        except GatewayRefusal as refused:
            refused.shape = wire
            await self.refuse(refused)
        finally:
            self.gateway.hold(-held[0])
            self.gateway.tally.finished(work_item_id, tools)

    async def refuse(self, refused: GatewayRefusal) -> None:
        """Answer `refused` in its wire's shape and close the connection after it."""
        self.gateway.refusals += 1
        log.info("model gateway refused a request: %s", refused.message)
        payload = refused.shape.error_body(refused.kind, refused.message)
        length = b"%d" % len(payload)
        headers = [*JSON, (b"content-length", length), (b"connection", b"close")]
        self.keep_alive = False
        # One write for the whole answer: a client that reads once sees all of it.
        await self.write(status_head(refused.status, headers) + payload)
