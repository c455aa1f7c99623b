"""HTTP/1.1 at the gateway's edges (`app.gateway.framing`): a session's requests and an
upstream's answers as httptools reads them, with the gateway's checks on top (a session's
request compared with what h11 reads from the same bytes), the heads the gateway writes, and
how an answer's body is delimited for a session."""

from __future__ import annotations

import h11
import pytest

from app.gateway.framing import (
    END,
    AnswerFraming,
    AnswerHead,
    FramingError,
    RequestHead,
    SessionRequests,
    UpstreamAnswers,
    field_allowed,
    request_bytes,
)

SSE = [(b"Content-Type", b"text/event-stream"), (b"request-id", b"req_1")]
LIMIT = 64 * 1024


def _answer(data: bytes) -> tuple[AnswerHead, bytes, bool]:
    """The first answer read from `data`: its head, its body, whether the body ended."""
    answers = UpstreamAnswers(LIMIT)
    answers.feed(data)
    head = answers.next()
    assert isinstance(head, AnswerHead)
    body = b""
    while isinstance(piece := answers.next(), bytes):
        body += piece
    return head, body, piece is END


def test_an_answer_keeps_its_headers_as_sent_and_says_how_its_body_ends() -> None:
    head, body, ended = _answer(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Empty:\r\n"
        b"anthropic-ratelimit-requests-remaining:  3999 \r\nContent-Length: 12\r\n\r\n"
        b"event: a\n\nxx"
    )
    assert (head.status, head.length, head.keep_alive, head.until_close) == (200, 12, True, False)
    assert body == b"event: a\n\nxx" and ended
    assert head.headers == [
        (b"Content-Type", b"text/event-stream"),
        (b"X-Empty", b""),
        (b"anthropic-ratelimit-requests-remaining", b"3999"),
        (b"Content-Length", b"12"),
    ]
    chunked, body, ended = _answer(
        b"HTTP/1.1 200 \r\nTransfer-Encoding: Chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    assert chunked.length is None and chunked.keep_alive and not chunked.until_close
    assert body == b"hello, world" and ended and chunked.headers[-1][0] == b"Transfer-Encoding"
    closing, body, ended = _answer(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\n\r\nab")
    assert closing.until_close and closing.length is None and not closing.keep_alive
    assert body == b"ab" and not ended  # its end is the connection's
    old, _, ended = _answer(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert old.length == 0 and not old.keep_alive and ended
    empty, body, ended = _answer(b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n")
    assert empty.length == 0 and body == b"" and ended


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Split: a\nX-Injected: b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Long: " + b"x" * (LIMIT + 10),
        *(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + size + b"hello\r\n"
            for size in (b"g\r\n", b"5\n", b"\r\n", b"-5\r\n")
        ),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
    ],
)
def test_an_answer_http_does_not_allow_is_refused(answer: bytes) -> None:
    answers = UpstreamAnswers(LIMIT)
    for at in range(0, len(answer), 1000):  # as it comes, in pieces
        answers.feed(answer[at : at + 1000])
    with pytest.raises(FramingError):
        while answers.next() is not None:
            pass


def test_a_credential_with_a_line_break_is_not_a_header() -> None:
    assert field_allowed(b"x-api-key", b"sk-ant-123")
    assert not field_allowed(b"x-api-key", b"sk-ant-123\r\nx-injected: 1")
    assert not field_allowed(b"x-api-key", b" sk-ant-123")


def _read_as_client(data: bytes, method: bytes = b"POST") -> tuple[int, list[object], bytes]:
    """What an HTTP/1.1 client (h11) reads from `data`: status, headers, body."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method=method, target=b"/", headers=[(b"host", b"x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(data)
    response = client.next_event()
    assert isinstance(response, h11.Response)
    body = b""
    while True:
        event = client.next_event()
        if isinstance(event, h11.Data):
            body += event.data
        elif event is h11.NEED_DATA:
            client.receive_data(b"")  # the connection ends: a body framed by it ends too
        else:
            assert isinstance(event, h11.EndOfMessage)
            break
    return response.status_code, list(response.headers), body


def test_a_body_of_unknown_length_goes_in_chunks_to_an_http11_session() -> None:
    framing = AnswerFraming(200, SSE, None, http11=True, keep_alive=True)
    data = framing.head + framing.body(b"event: a\n\n") + framing.body(b"") + framing.body(b"x")
    status, headers, body = _read_as_client(data + framing.end)
    assert status == 200 and body == b"event: a\n\nx" and framing.keep_alive
    assert (b"transfer-encoding", b"chunked") in headers
    assert (b"request-id", b"req_1") in headers


def test_a_body_of_unknown_length_ends_with_the_connection_for_an_http10_session() -> None:
    framing = AnswerFraming(200, SSE, None, http11=False, keep_alive=False)
    assert not framing.keep_alive and framing.end == b""
    status, headers, body = _read_as_client(framing.head + framing.body(b"all of it"))
    assert status == 200 and body == b"all of it" and (b"connection", b"close") in headers


def test_a_body_of_known_length_goes_as_it_is() -> None:
    framing = AnswerFraming(
        429, [*SSE, (b"Content-Length", b"4")], 4, http11=True, keep_alive=False
    )
    assert framing.body(b"busy") == b"busy" and not framing.keep_alive
    status, headers, body = _read_as_client(framing.head + framing.body(b"busy") + framing.end)
    assert status == 429 and body == b"busy"
    assert framing.head.startswith(b"HTTP/1.1 429 Too Many Requests\r\n")
    assert (b"connection", b"close") in headers and (b"content-length", b"4") in headers


def test_a_request_head_is_what_a_server_reads() -> None:
    headers = [(b"host", b"api.example"), (b"content-length", b"2")]
    server = h11.Connection(h11.SERVER)
    server.receive_data(request_bytes(b"POST", b"/v1/messages?beta=true", headers) + b"{}")
    request = server.next_event()
    assert isinstance(request, h11.Request)
    assert request.target == b"/v1/messages?beta=true" and list(request.headers) == headers
    data = server.next_event()
    assert isinstance(data, h11.Data) and data.data == b"{}"


BASE = [b"POST /v1/messages?beta=true HTTP/1.1", b"Host: 127.0.0.1:4000", b"x-api-key: k"]
# Request heads, each read by h11 and by the gateway. These both take or refuse alike, and
# read alike:
ALIKE = [
    BASE,
    [*BASE, b"Content-Length: 5"],
    [*BASE, b"Content-Length: 5, 6"],
    [*BASE, b"Content-Length: 5", b"Content-Length: 6"],
    [*BASE, b"Content-Length: +5"],
    [*BASE, b"Content-Length: 123456789012345678901"],
    [*BASE, b"Transfer-Encoding: Chunked"],
    [*BASE, b"Transfer-Encoding: gzip"],
    [*BASE, b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"],
    [*BASE, b"Expect: 100-Continue", b"Content-Length: 5"],
    [b"POST / HTTP/1.0", b"Expect: 100-continue", b"Content-Length: 5"],
    [b"POST / HTTP/1.0", b"Connection: keep-alive"],
    [b"POST / HTTP/1.1"],
    [*BASE, b"Host: again"],
    [BASE[0], b" folded: first", *BASE[1:]],
    [*BASE, b"X-Empty:", b"X-Blanks:   spaced   out  "],
    [*BASE, b"Bad Name: x"],
    [*BASE, b"X-Nul: a\x00b"],
    [*BASE, b"X-Cr: a\rb"],
    [*BASE, b"NoColon"],
    [b"POST /v1/messages HTTP/1.1 ", *BASE[1:]],
    [b"POST /v1/\x7fmessages HTTP/1.1", *BASE[1:]],
    [b"POST /v1/messages HTTP/11", *BASE[1:]],
    [b"P(ST /v1/messages HTTP/1.1", *BASE[1:]],
]
# h11 takes these; the gateway refuses them, as RFC 9112 lets a server: a list of lengths
# (6.3), a length beside chunks (6.1: the framing two readers may each take differently),
# obsolete line folding (5.2); and (the gateway's own check) a version that is not 1.x.
REFUSED = [
    [*BASE, b"Content-Length: 5, 5", b"content-length: 5"],
    [*BASE, b"Transfer-Encoding: chunked", b"Content-Length: 3"],
    [*BASE, b"X-Folded: a", b" b", b"\tc"],
    [b"POST /v1/messages HTTP/2.0", *BASE[1:]],
]
# h11 refuses these; llhttp reads them as the second head, as RFC 9112 lets a server: words
# of the request line split on more than one space (3), an empty line before it (2.2).
READ_AS = [
    ([b"POST  /v1/messages HTTP/1.1", *BASE[1:]], [b"POST /v1/messages HTTP/1.1", *BASE[1:]]),
    ([b"", *BASE], BASE),
]
BODY = b"5\r\nhello\r\n0\r\n\r\n"  # a chunked body, or the first bytes of a longer one


def _head(lines: list[bytes], newline: bytes = b"\r\n") -> bytes:
    return newline.join(lines) + newline + newline


def _h11_reads(head: bytes) -> tuple[object, ...] | None:
    server = h11.Connection(h11.SERVER)
    try:
        server.receive_data(head + BODY)
        request = server.next_event()
        assert isinstance(request, h11.Request)
        waits = server.they_are_waiting_for_100_continue
        data = b""
        while isinstance(event := server.next_event(), h11.Data):
            data += event.data
    except h11.ProtocolError:
        return None
    headers = list(request.headers)
    return request.method, request.target, request.http_version, headers, waits, data


def _gateway_reads(head: bytes) -> tuple[object, ...] | None:
    requests = SessionRequests(LIMIT)
    requests.feed(head + BODY)
    try:
        request = requests.next()
        assert isinstance(request, RequestHead)
        data = b""
        while isinstance(piece := requests.next(), bytes):
            data += piece
    except FramingError:
        return None
    assert piece is END  # what follows it is the next request's
    return (
        request.method,
        request.target,
        request.http_version,
        request.headers,
        request.expects_continue,
        data,
    )


@pytest.mark.parametrize("lines", ALIKE)
def test_a_session_s_request_head_is_read_as_h11_reads_it(lines: list[bytes]) -> None:
    assert _gateway_reads(_head(lines)) == _h11_reads(_head(lines))


@pytest.mark.parametrize("lines", REFUSED)
def test_a_head_whose_framing_two_readers_could_take_apart_is_refused(
    lines: list[bytes],
) -> None:
    assert _h11_reads(_head(lines)) is not None
    assert _gateway_reads(_head(lines)) is None


@pytest.mark.parametrize(("lines", "read_as"), READ_AS)
def test_a_head_the_rfc_lets_a_server_take_is_read_as_its_plain_form(
    lines: list[bytes], read_as: list[bytes]
) -> None:
    assert _h11_reads(_head(lines)) is None
    assert _gateway_reads(_head(lines)) == _h11_reads(_head(read_as)) is not None


@pytest.mark.parametrize("lines", [*ALIKE, *REFUSED])
def test_a_head_whose_lines_end_in_lf_alone_is_refused(lines: list[bytes]) -> None:
    assert _gateway_reads(_head(lines, b"\n")) is None


def _requests(data: bytes) -> list[object]:
    """What the gateway finds in `data`, up to where it fails (`FramingError` last)."""
    requests = SessionRequests(LIMIT)
    for at in range(0, len(data), 7):  # as it comes, in small pieces
        requests.feed(data[at : at + 7])
    found: list[object] = []
    try:
        while (event := requests.next()) is not None:
            found.append(event)
    except FramingError as failure:
        found.append(failure)
    return found


def test_requests_one_after_another_are_read_in_turn_until_one_closes() -> None:
    first = b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    first += b"3;x=1\r\nhel\r\n2\r\nlo\r\n0\r\nX-Trailer: t\r\n\r\n"
    second = b"POST /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    found = _requests(first + second + b"POST /c HTTP/1.1\r\n")
    heads = [event for event in found if isinstance(event, RequestHead)]
    assert [(h.target, h.keep_alive) for h in heads] == [(b"/a", True), (b"/b", False)]
    assert heads[1].headers == [(b"host", b"x"), (b"connection", b"close")]  # no trailer
    assert b"".join(e for e in found if isinstance(e, bytes)) == b"hello"
    assert found.index(heads[1]) == found.index(END) + 1  # after the first one's end
    assert found[-2:] == [END, found[-1]] and isinstance(found[-1], FramingError)
    old = _requests(b"POST / HTTP/1.0\r\n\r\n")[0]
    assert isinstance(old, RequestHead) and not old.keep_alive


@pytest.mark.parametrize(
    "sent",
    [
        b"POST / HTTP/1.1\r\nHost: x\r\nX-Long: " + b"x" * (LIMIT + 10),
        b"\r\n" * LIMIT,
        b"POST / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\nConnection: upgrade\r\n\r\n",
        b"\x16\x03\x01\x02\x00",  # TLS on the plain port
    ],
)
def test_a_head_too_long_a_switch_of_protocols_or_not_http_is_refused(
    sent: bytes,
) -> None:
    found = _requests(sent)
    assert len(found) == 1 and isinstance(found[0], FramingError)
