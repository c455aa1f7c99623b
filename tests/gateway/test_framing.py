"""The HTTP/1.1 the gateway frames itself (`app.gateway.framing`): an upstream answer's head
read and checked, the heads it writes, and how an answer's body is delimited for a session."""

from __future__ import annotations

import h11
import pytest

from app.gateway.framing import (
    HEAD_END,
    AnswerFraming,
    FramingError,
    answer_head,
    chunk_size,
    field_allowed,
    request_bytes,
    session_request,
)

SSE = [(b"Content-Type", b"text/event-stream"), (b"request-id", b"req_1")]


def test_an_answer_head_keeps_its_headers_as_sent_and_says_how_its_body_ends() -> None:
    head = answer_head(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Empty:\r\n"
        b"anthropic-ratelimit-requests-remaining:  3999 \r\nContent-Length: 12\r\n\r\n"
    )
    assert head.status == 200 and head.length == 12 and not head.chunked and head.keep_alive
    assert head.headers == [
        (b"Content-Type", b"text/event-stream"),
        (b"X-Empty", b""),
        (b"anthropic-ratelimit-requests-remaining", b"3999"),
        (b"Content-Length", b"12"),
    ]
    chunked = answer_head(b"HTTP/1.1 200 \r\nTransfer-Encoding: Chunked\r\n\r\n")
    assert chunked.chunked and chunked.length is None and chunked.keep_alive
    closing = answer_head(b"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\n\r\n")
    assert closing.length is None and not closing.chunked and not closing.keep_alive
    old = answer_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")
    assert old.length == 0 and not old.keep_alive
    assert answer_head(b"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n").length == 0
    assert answer_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n").length == 5


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Split: a\nX-Injected: b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Nul: a\x00b\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n",
    ],
)
def test_a_head_http_does_not_allow_is_refused(head: bytes) -> None:
    with pytest.raises(FramingError):
        answer_head(head)


def test_a_chunk_size_line_is_read_with_its_extensions_ignored() -> None:
    assert chunk_size(b"1a\r\n") == 26
    assert chunk_size(b"0;name=value\r\n") == 0
    for line in (b"g\r\n", b"1a\n", b"\r\n", b"-1\r\n"):
        with pytest.raises(FramingError):
            chunk_size(line)


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
# Request heads (lines, joined with CRLF unless they hold their own ends), each read by h11
# and by the gateway: both must take or refuse it alike, and read it alike.
HEADS = [
    BASE,
    [*BASE, b"Content-Length: 5"],
    [*BASE, b"Content-Length: 5, 5", b"content-length: 5"],
    [*BASE, b"Content-Length: 5, 6"],
    [*BASE, b"Content-Length: 5", b"Content-Length: 6"],
    [*BASE, b"Content-Length: +5"],
    [*BASE, b"Content-Length: 123456789012345678901"],
    [*BASE, b"Transfer-Encoding: Chunked"],
    [*BASE, b"Transfer-Encoding: chunked", b"Content-Length: 3"],
    [*BASE, b"Transfer-Encoding: gzip"],
    [*BASE, b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"],
    [*BASE, b"Expect: 100-Continue", b"Content-Length: 5"],
    [b"POST / HTTP/1.0", b"Expect: 100-continue", b"Content-Length: 5"],
    [b"POST / HTTP/1.0", b"Connection: keep-alive"],
    [b"POST / HTTP/1.1"],
    [*BASE, b"Host: again"],
    [*BASE, b"X-Folded: a", b" b", b"\tc"],
    [BASE[0], b" folded: first", *BASE[1:]],
    [*BASE, b"X-Empty:", b"X-Blanks:   spaced   out  "],
    [*BASE, b"Bad Name: x"],
    [*BASE, b"X-Nul: a\x00b"],
    [*BASE, b"X-Cr: a\rb"],
    [*BASE, b"NoColon"],
    [b"POST  /v1/messages HTTP/1.1", *BASE[1:]],
    [b"POST /v1/messages HTTP/1.1 ", *BASE[1:]],
    [b"POST /v1/\x7fmessages HTTP/1.1", *BASE[1:]],
    [b"POST /v1/messages HTTP/11", *BASE[1:]],
    [b"P(ST /v1/messages HTTP/1.1", *BASE[1:]],
    [b"POST /v1/messages HTTP/2.0", *BASE[1:]],
    [b"", *BASE],
]


def _h11_reads(head: bytes, body: bytes) -> tuple[object, ...] | None:
    server = h11.Connection(h11.SERVER)
    try:
        server.receive_data(head + body)
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


def _gateway_reads(head: bytes, body: bytes) -> tuple[object, ...] | None:
    try:
        request = session_request(head)
    except FramingError:
        return None
    data = b"hello" if request.length is None else body[: request.length]
    return (
        request.method,
        request.target,
        request.http_version,
        request.headers,
        request.expects_continue,
        data,
    )


@pytest.mark.parametrize("lines", HEADS)
@pytest.mark.parametrize("newline", [b"\r\n", b"\n"])
def test_a_session_s_request_head_is_read_as_h11_reads_it(
    lines: list[bytes], newline: bytes
) -> None:
    head = newline.join(lines) + newline + newline
    body = b"5\r\nhello\r\n0\r\n\r\n"  # a chunked body, or the first bytes of a longer one
    assert HEAD_END.search(head) is not None
    assert _gateway_reads(head, body) == _h11_reads(head, body)


def test_a_request_says_whether_its_connection_serves_another() -> None:
    assert session_request(b"POST / HTTP/1.1\r\nHost: x\r\n\r\n").keep_alive
    assert not session_request(
        b"POST / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n"
    ).keep_alive
    assert not session_request(b"POST / HTTP/1.0\r\n\r\n").keep_alive
