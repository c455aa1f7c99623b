"""HTTP/1.1 at the model gateway's two edges: what it reads is parsed by httptools (llhttp, the C
parser of Node.js that uvicorn also runs on), what it writes it writes itself. Pure.

Reading, on both sides, is one parser per connection fed the bytes as they arrive; what it
finds comes out in order (`MessageReader.next`): a head, the pieces of its body, `END` at the
end of its body (by its length, its chunks with their extensions and trailer passed over, or,
for an answer, the connection's end), then the next message's head. A parse that fails is a
`FramingError`, raised once what came before it was taken. Header names are as sent (a
session's lower-cased), values without the blanks around them.

llhttp holds a message to RFC 9112 strictly: lines end in CRLF, no obsolete line folding, one
Content-Length and only digits in it, none beside a Transfer-Encoding, chunk sizes in hex. The
gateway checks what llhttp leaves to its user. A session's request (sessions are not trusted)
must be HTTP/1.0 or 1.1, name one Host (HTTP/1.1), give a Transfer-Encoding only as `chunked`,
once, and may not switch protocols; an upstream answer's Transfer-Encoding is `chunked` alone
(an answer is relayed decoded). Past `limit` bytes in a row in which nothing is found (no
head's end, no piece of a body) the bytes are refused too, so a head or a trailer cannot grow
past it by more than the read that began it: llhttp sets no size of its own, and httptools
holds a header's value whole.

Writing needs no parser: a request head upstream, an answer's head to a session (its body by
its length, in chunks, or until the connection closes: `AnswerFraming`), built straight from
bytes already parsed or checked (`field_allowed` for the operator's credential).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from http import HTTPStatus
from typing import Final, Generic, TypeVar

import httptools

from app.gateway.gateway_errors import GatewayError

Headers = list[tuple[bytes, bytes]]

# RFC 9112's header line: a token for a name, a value of visible bytes with inner blanks.
_FIELD = re.compile(
    rb"([-!#$%&'*+.^_`|~0-9A-Za-z]+):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*"
)
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
_BLANKS = b" \t"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


class FramingError(GatewayError, ValueError):
    """Bytes that are not the HTTP/1.1 message the gateway reads (see the module's rules)."""


class MessageEnd:
    """The end of a message's body (`END`)."""


END: Final = MessageEnd()


@dataclass(frozen=True)
class RequestHead:
    """A session's request head; `headers` have their names lower-cased."""

    method: bytes
    target: bytes
    http_version: bytes
    headers: Headers
    keep_alive: bool  # the connection may serve another request after this one
    expects_continue: bool  # the client waits for `100 Continue` before its body


@dataclass(frozen=True)
class AnswerHead:
    """An upstream answer's head, its headers as sent. `length` is its body's size, None
    when it comes in chunks or `until_close`; `keep_alive` whether the connection may
    carry another request once the body was read."""

    status: int
    headers: Headers
    length: int | None
    keep_alive: bool
    until_close: bool  # the body ends when the connection does


Head = TypeVar("Head", RequestHead, AnswerHead)


class MessageReader(Generic[Head]):
    """One connection's messages, read by httptools from the bytes `feed` is given: `next()`
    takes what was found, in order; None when more bytes are needed. `midway` while a
    message was begun and has not ended."""

    def __init__(self, limit: int) -> None:
        self.found: deque[Head | bytes | MessageEnd] = deque()
        self.failure: FramingError | None = None
        self.midway = False
        self._limit = limit
        self._quiet = 0  # bytes fed in a row in which nothing was found
        self._headers: Headers = []
        self._in_head = False
        self._parser: httptools.HttpRequestParser | httptools.HttpResponseParser

    def feed(self, data: bytes) -> None:
        """Parse `data`, the next bytes the connection brought."""
        if self.failure is not None:
            return  # nothing past a failure is read
        found = len(self.found)
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            ours = exc.__context__  # what one of the callbacks below raised, if one did
            if ours is not None and not isinstance(ours, FramingError):
                raise ours from exc  # a fault of the gateway's, not of the bytes
            self.failure = ours or FramingError(repr(exc))
            return
        if len(self.found) > found:
            self._quiet = 0
            return
        self._quiet += len(data)
        if self._quiet > self._limit:
            self.failure = FramingError(f"{self._quiet} bytes without a head's end or a body")

    def next(self) -> Head | bytes | MessageEnd | None:
        """What was found next (a head, a piece of a body, `END`); None until more bytes
        come; a `FramingError` where the parse failed."""
        if self.found:
            return self.found.popleft()
        if self.failure is not None:
            raise self.failure
        return None

    # -- httptools' callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.midway, self._in_head, self._headers = True, True, []

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_head:  # else a field of a chunked body's trailer: passed over
            if value and value[-1] in _BLANKS:
                value = value.rstrip(_BLANKS)
            self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self.found.append(body)

    def on_message_complete(self) -> None:
        self.midway = False
        self.found.append(END)


class SessionRequests(MessageReader[RequestHead]):
    """A session's requests, one after another on its connection."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._target = b""
        self._parser = self._request = httptools.HttpRequestParser(self)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._target = b""

    def on_url(self, url: bytes) -> None:
        self._target += url

    def on_headers_complete(self) -> None:
        self._in_head = False
        parser = self._request
        version = parser.get_http_version()
        if version not in ("1.1", "1.0"):
            raise FramingError(f"HTTP/{version} is not HTTP/1.1")
        if parser.should_upgrade():
            raise FramingError("a request may not switch protocols")
        headers = [(name.lower(), value) for name, value in self._headers]
        hosts, codings, expects = 0, 0, False
        for at, (name, value) in enumerate(headers):
            if name == b"host":
                hosts += 1
            elif name == b"expect":
                expects = expects or b"100-continue" in _tokens(value)
            elif name == b"transfer-encoding":
                codings += 1
                if codings > 1 or value.lower() != b"chunked":
                    raise FramingError("a Transfer-Encoding must be `chunked`, given once")
                headers[at] = (name, b"chunked")
        if hosts > 1 or (hosts == 0 and version == "1.1"):
            raise FramingError("a request must name one Host")
        http11 = version == "1.1"
        self.found.append(
            RequestHead(
                parser.get_method(),
                self._target,
                version.encode(),
                headers,
                http11 and parser.should_keep_alive(),
                expects and http11,
            )
        )


class UpstreamAnswers(MessageReader[AnswerHead]):
    """An upstream's answers, one after another on its connection (an interim `1xx` is an
    answer of its own, without a body)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._parser = self._answer = httptools.HttpResponseParser(self)

    def on_headers_complete(self) -> None:
        self._in_head = False
        status = self._answer.get_status_code()
        length: int | None = None
        codings: list[bytes] = []
        for name, value in self._headers:
            lowered = name.lower()
            if lowered == b"content-length":
                length = int(value)  # llhttp let one through, and only digits
            elif lowered == b"transfer-encoding":
                codings += _tokens(value)
        if codings and codings != [b"chunked"]:
            raise FramingError("an answer's Transfer-Encoding must be `chunked` alone")
        if status < 200 or status in (204, 304):
            length, until_close = 0, False
        else:
            until_close = length is None and not codings
        keep_alive = self._parser.should_keep_alive() and not until_close
        self.found.append(AnswerHead(status, self._headers, length, keep_alive, until_close))


def _tokens(value: bytes) -> list[bytes]:
    return [token.strip() for token in value.lower().split(b",") if token.strip()]


def request_bytes(method: bytes, target: bytes, headers: Headers) -> bytes:
    """A request's head as sent upstream; `headers` already checked (a session's, parsed,
    or the gateway's own)."""
    lines = b"".join([b"%s: %s\r\n" % pair for pair in headers])
    return b"%s %s HTTP/1.1\r\n%s\r\n" % (method, target, lines)


def field_allowed(name: bytes, value: bytes) -> bool:
    """Whether a header the gateway adds itself (the operator's credential) is one line."""
    return _FIELD.fullmatch(name + b": " + value) is not None and value == value.strip()


class AnswerFraming:
    """How an answer goes to a session: its head (`head`), each piece of its body
    (`body(data)`), its end (`end`). A body of known length goes as it is; one of unknown
    length goes in chunks to an HTTP/1.1 client, and until the connection closes to an older
    one. `keep_alive` says whether the connection may serve another request after it."""

    def __init__(
        self,
        status: int,
        headers: Headers,
        length: int | None,
        *,
        http11: bool,
        keep_alive: bool,
    ) -> None:
        self.chunked = False
        extra: Headers = []
        if length is None and status not in (204, 304):
            if http11:
                self.chunked = True
                extra.append((b"transfer-encoding", b"chunked"))
            else:
                keep_alive = False
        if not keep_alive:
            extra.append((b"connection", b"close"))
        self.keep_alive = keep_alive
        self.head = status_head(status, [*headers, *extra] if extra else headers)
        self.end = LAST_CHUNK if self.chunked else b""

    def body(self, data: bytes) -> bytes:
        if not self.chunked or not data:
            return data
        return b"%x\r\n%s\r\n" % (len(data), data)


def status_head(status: int, headers: Headers) -> bytes:
    """An answer's head to a session: its status line and `headers` (already checked)."""
    lines = b"".join([b"%s: %s\r\n" % pair for pair in headers])
    return b"HTTP/1.1 %d %s\r\n%s\r\n" % (status, _REASONS.get(status, b""), lines)
