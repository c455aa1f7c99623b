"""Whatever bytes a session (or an upstream) sends, and however it cuts them into writes,
the gateway's readers find the same messages and fail only with a `FramingError`: a session
cannot make the gateway fault, nor have one cut of its bytes read otherwise than another."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.gateway.framing import FramingError, MessageReader, SessionRequests, UpstreamAnswers

LIMIT = 64 * 1024
STARTS = [
    b"POST /v1/messages HTTP/1.1\r\n",
    b"POST /v1/messages?beta=true HTTP/1.1\r\n",
    b"GET / HTTP/1.0\r\n",
    b"CONNECT x:443 HTTP/1.1\r\n",
    b"POST /v1/messages HTTP/2.0\r\n",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n",
    b"HTTP/1.0 502 Bad Gateway\r\n",
]
FIELDS = [
    b"Host: gateway\r\n",
    b"Host: gateway\r\n",
    b"Host: gateway\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: 5, 5\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"Upgrade: h2c\r\nConnection: upgrade\r\n",
    b" folded\r\n",
    b"X-Bare: lf\n",
]
BODIES = [
    b"hello",
    b"5\r\nhello\r\n",
    b"5;ext=1\r\nhello\r\n",
    b"0\r\nX-T: t\r\n\r\n",
    b"0\r\n\r\n",
]
BODIES += [b"ffffffffffffffffff\r\n"]
MESSAGES = st.tuples(
    st.sampled_from(STARTS),
    st.lists(st.sampled_from(FIELDS), max_size=5),
    st.lists(st.sampled_from(BODIES) | st.binary(max_size=8), max_size=3),
).map(lambda m: m[0] + b"".join(m[1]) + b"\r\n" + b"".join(m[2]))
# A few messages on one connection, then maybe stray bytes: mostly well-formed enough that
# bodies and the messages after them are reached, not refused at the first byte.
STREAMS = st.tuples(st.lists(MESSAGES, min_size=1, max_size=3), st.binary(max_size=16)).map(
    lambda t: b"".join(t[0]) + t[1]
)
CUTS = st.lists(st.integers(min_value=0, max_value=800), max_size=10)


def _read(reader: MessageReader[Any], data: bytes, cuts: list[int]) -> list[object]:
    """What `reader` finds in `data` fed in the pieces `cuts` makes, up to its failure (its
    kind last), a body's pieces joined; anything but a `FramingError` fails the test."""
    start = 0
    for cut in sorted(cuts):
        reader.feed(data[start:cut])
        start = max(start, cut)
    reader.feed(data[start:])
    found: list[object] = []
    try:
        while (event := reader.next()) is not None:
            if isinstance(event, bytes) and found and isinstance(found[-1], bytes):
                found[-1] += event  # where a body was cut is not what was read
            else:
                found.append(event)
    except FramingError as failure:
        found.append(("failed", type(failure)))
    return found


@settings(max_examples=300, deadline=None)
@given(STREAMS, CUTS)
def test_a_session_s_bytes_read_alike_however_they_are_cut(data: bytes, cuts: list[int]) -> None:
    whole = _read(SessionRequests(LIMIT), data, [])
    assert _read(SessionRequests(LIMIT), data, cuts) == whole


def test_the_pieces_make_requests_and_answers_with_bodies() -> None:
    """The strategy's parts reach past the heads: into bodies, chunked ones and the next
    message on the same connection, for both readers."""
    post, host = b"POST /v1/messages HTTP/1.1\r\n", b"Host: gateway\r\n"
    assert {post, host} <= {*STARTS, *FIELDS} and {b"hello", b"0\r\n\r\n"} <= {*BODIES}
    request = post + host + b"Content-Length: 5\r\n\r\nhello"
    chunked = post + host + b"Transfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n"
    found = _read(SessionRequests(LIMIT), request + chunked, [31, 70, 90])
    assert [e for e in found if isinstance(e, bytes)] == [b"hello", b"hello"]
    assert [type(e).__name__ for e in found].count("RequestHead") == 2
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
    found = _read(UpstreamAnswers(LIMIT), answer, [20, 40])
    assert [e for e in found if isinstance(e, bytes)] == [b"hello"]


@settings(max_examples=300, deadline=None)
@given(STREAMS, CUTS)
def test_an_upstream_s_bytes_read_alike_however_they_are_cut(data: bytes, cuts: list[int]) -> None:
    whole = _read(UpstreamAnswers(LIMIT), data, [])
    assert _read(UpstreamAnswers(LIMIT), data, cuts) == whole
