"""HTTP/1.1 as the model gateway frames it itself: a session's request head parsed and
checked, the heads it writes (a request upstream, an answer to a session) built straight from
bytes already checked, an upstream answer's head parsed and checked once, and how each body is
delimited (its length, chunks, or the end of the connection). Pure.

Not h11, which makes an event of every head and every chunk, checks each header of each event
against its grammar again and walks its state machine per event: on the gateway's two sides
that is about half of its CPU per relayed stream (`bench/gateway` prints it). Here a head is
checked once, as it is parsed, against the same grammar (RFC 9112's, as h11 reads it), and its
headers are relayed as parsed.

A session's request is read as h11 reads it (sessions are untrusted: the rules are its
rules): lines may end in LF alone, obsolete line folding is unfolded, an HTTP/1.1 request
names exactly one Host, a Content-Length is one number (repeated alike at most), a
Transfer-Encoding is `chunked` alone, given once, and wins over a Content-Length. An upstream
answer's head is held to more: lines end in CRLF, no folding, a Transfer-Encoding with a
Content-Length is refused. What breaks these is a `FramingError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from http import HTTPStatus

Headers = list[tuple[bytes, bytes]]

# RFC 9112's grammar as h11 reads it: a token for a name, any byte but NUL and white space
# around inner blanks for a value, optional white space around it.
_FIELD = re.compile(
    rb"([-!#$%&'*+.^_`|~0-9A-Za-z]+):[ \t]*((?:[^\x00\s]+(?:[ \t]+[^\x00\s]+)*)?)[ \t]*"
)
_REQUEST = re.compile(rb"([-!#$%&'*+.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP/([0-9]\.[0-9])")
_STATUS = re.compile(rb"HTTP/([0-9])\.([0-9]) ([0-9]{3})(?: ((?:[ \t]|[^\x00\s])*))?")
_CHUNK_SIZE = re.compile(rb"([0-9A-Fa-f]{1,20})(?:;.*)?[ \t]*\r\n")
_LENGTH = re.compile(rb"[0-9]+")
_REASONS = {status.value: status.phrase.encode() for status in HTTPStatus}
HEAD_END = re.compile(rb"\n\r?\n")  # a head's last line ends, as h11 finds it
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
LAST_CHUNK = b"0\r\n\r\n"


class FramingError(ValueError):
    """A head (a session's request, an upstream's answer) or a chunk's size line that
    HTTP/1.1, as read here, does not allow."""


@dataclass(frozen=True)
class RequestHead:
    """A session's request head. `headers` have their names lower-cased; `length` is the
    body's size, None for a chunked body."""

    method: bytes
    target: bytes
    http_version: bytes
    headers: Headers
    length: int | None
    keep_alive: bool  # the connection may serve another request after this one
    expects_continue: bool  # the client waits for `100 Continue` before its body


def session_request(head: bytes) -> RequestHead:
    """Parse a request head: its bytes up to and including the blank line (`HEAD_END`)."""
    lines = [line[:-1] if line.endswith(b"\r") else line for line in head.split(b"\n")[:-2]]
    request = _REQUEST.fullmatch(lines[0]) if lines else None
    if request is None:
        raise FramingError(f"not a request line: {lines[0][:100] if lines else b''!r}")
    version = request[3]
    headers: Headers = []
    hosts, close, expects, chunked, length = 0, version < b"1.1", False, False, None
    for line in _unfolded(lines[1:]):
        field = _FIELD.fullmatch(line)
        if field is None:
            raise FramingError(f"not a header line: {line[:100]!r}")
        name, value = field[1].lower(), field[2]
        if name == b"host":
            hosts += 1
        elif name == b"connection":
            close = close or b"close" in _tokens(value)
        elif name == b"expect":
            expects = expects or b"100-continue" in _tokens(value)
        elif name == b"transfer-encoding":
            if chunked or value.lower() != b"chunked":
                raise FramingError("a Transfer-Encoding must be `chunked`, given once")
            chunked, value = True, b"chunked"
        elif name == b"content-length":
            lengths = {size.strip() for size in value.split(b",")}
            given = lengths.pop()
            if lengths or not _LENGTH.fullmatch(given) or len(given) > 20:
                raise FramingError("a Content-Length must be one number")
            if length is not None:
                if length != int(given):
                    raise FramingError("Content-Lengths that differ")
                continue  # one is kept
            length, value = int(given), given
        headers.append((name, value))
    if hosts > 1 or (hosts == 0 and version == b"1.1"):
        raise FramingError("a request must name one Host")
    return RequestHead(
        request[1],
        request[2],
        version,
        headers,
        None if chunked else (length or 0),
        not close,
        expects and version >= b"1.1",
    )


def _unfolded(lines: list[bytes]) -> list[bytes]:
    """Header lines with obsolete line folding undone (a line that begins with a blank goes
    on the one before it, after one space), as h11 reads them."""
    if not any(line[:1] in (b" ", b"\t") for line in lines):
        return lines
    out: list[bytes] = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            if not out:
                raise FramingError("a head's first header line cannot continue another")
            out[-1] += b" " + line.lstrip(b" \t")
        else:
            out.append(line)
    return out


def request_bytes(method: bytes, target: bytes, headers: Headers) -> bytes:
    """A request's head as sent upstream; `headers` already checked (a session's, parsed,
    or the gateway's own)."""
    lines = b"".join([b"%s: %s\r\n" % pair for pair in headers])
    return b"%s %s HTTP/1.1\r\n%s\r\n" % (method, target, lines)


def field_allowed(name: bytes, value: bytes) -> bool:
    """Whether a header the gateway adds itself (the operator's credential) is one line."""
    return _FIELD.fullmatch(name + b": " + value) is not None and value == value.strip()


@dataclass(frozen=True)
class AnswerHead:
    """An upstream answer's head. `length` is its body's size, None when the body comes in
    chunks (`chunked`) or runs until the connection closes; `keep_alive` whether the
    connection may carry another request once the body was read."""

    status: int
    headers: Headers
    length: int | None
    chunked: bool
    keep_alive: bool


def answer_head(head: bytes) -> AnswerHead:
    """Parse an answer's head: its bytes up to and including the blank line."""
    lines = head.split(b"\r\n")
    if len(lines) < 3 or lines[-1] or lines[-2]:
        raise FramingError("an answer's head must end in an empty line")
    status = _STATUS.fullmatch(lines[0])
    if status is None:
        raise FramingError(f"not a status line: {lines[0][:100]!r}")
    headers: Headers = []
    close = status[1] == b"0" or status[2] == b"0"  # HTTP/1.0 (or 0.9): no keep-alive
    encodings: list[bytes] = []
    lengths: set[bytes] = set()
    for line in lines[1:-2]:
        field = _FIELD.fullmatch(line)
        if field is None:
            raise FramingError(f"not a header line: {line[:100]!r}")
        name, value = field[1], field[2]
        headers.append((name, value))
        lowered = name.lower()
        if lowered == b"connection":
            close = close or b"close" in _tokens(value)
        elif lowered == b"transfer-encoding":
            encodings += _tokens(value)
        elif lowered == b"content-length":
            lengths.update(_tokens(value))
    code = int(status[3])
    if code in (204, 304) or code < 200:
        return AnswerHead(code, headers, 0, False, not close)
    if encodings:
        if encodings != [b"chunked"] or lengths:
            raise FramingError("only a chunked Transfer-Encoding, without a Content-Length")
        return AnswerHead(code, headers, None, True, not close)
    if lengths:
        length = lengths.pop()
        if lengths or not _LENGTH.fullmatch(length) or len(length) > 20:
            raise FramingError("a Content-Length must be one number")
        return AnswerHead(code, headers, int(length), False, not close)
    return AnswerHead(code, headers, None, False, False)  # its body ends with the connection


def chunk_size(line: bytes) -> int:
    """The size a chunk's size line (CRLF included) announces; extensions are ignored."""
    size = _CHUNK_SIZE.fullmatch(line)
    if size is None:
        raise FramingError(f"not a chunk size: {line[:100]!r}")
    return int(size[1], 16)


def _tokens(value: bytes) -> list[bytes]:
    return [token.strip() for token in value.lower().split(b",") if token.strip()]


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
