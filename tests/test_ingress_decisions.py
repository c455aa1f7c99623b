"""The webhook path's decisions as plain functions: what a request gets before, and after,
its body is read. Both fronts (WSGI and ASGI) answer with exactly these."""

from __future__ import annotations

import asyncio
import json

from githubkit.webhooks import sign

from app.asgi import ClientGone, read_body
from app.github.webhooks import MAX_BODY, Answer, Verified, acknowledged, precheck, screen
from tests.support import fixture_bytes

SECRET = "s3cret"


def headers_for(body: bytes, event: str = "issues", delivery: str = "d-1") -> dict[str, str]:
    return {
        "x-github-event": event,
        "x-github-delivery": delivery,
        "x-hub-signature-256": sign(SECRET, body),
        "content-length": str(len(body)),
    }


def test_precheck_refuses_other_methods_and_bad_lengths():
    refused = precheck("GET", {})
    assert isinstance(refused, Answer) and refused.status.startswith("405")
    assert ("Allow", "POST") in refused.headers
    for raw in ("ten", "-1"):
        bad = precheck("POST", {"content-length": raw})
        assert isinstance(bad, Answer) and bad.status.startswith("400")
    assert precheck("POST", {"content-length": "12"}) == 12
    assert precheck("POST", {}) == 0


def test_precheck_refuses_a_declared_body_over_the_limit_and_says_so_in_an_event():
    answer = precheck(
        "POST",
        {
            "content-length": str(MAX_BODY + 1),
            "x-github-delivery": "big-1",
            "x-github-event": "push",
        },
    )
    assert isinstance(answer, Answer) and answer.status.startswith("413")
    assert answer.event == (
        "webhook.rejected",
        {"reason": "too-large", "delivery": "big-1", "gh_event": "push"},
    )


def test_screen_verifies_before_it_parses():
    body = b"{not json"
    forged = screen(SECRET, {**headers_for(body), "x-hub-signature-256": "sha256=00"}, body, "x")
    assert isinstance(forged, Answer) and forged.status.startswith("401")
    assert forged.event is not None and forged.event[1]["reason"] == "bad-signature"
    missing = {k: v for k, v in headers_for(body).items() if k != "x-hub-signature-256"}
    unsigned = screen(SECRET, missing, body, None)
    assert isinstance(unsigned, Answer) and unsigned.event is not None
    assert unsigned.event[1]["reason"] == "missing-signature"
    no_secret = screen(None, headers_for(body), body, None)
    assert isinstance(no_secret, Answer) and no_secret.status.startswith("401")
    malformed = screen(SECRET, headers_for(body), body, None)
    assert isinstance(malformed, Answer) and malformed.status.startswith("400")


def test_screen_needs_the_event_and_delivery_headers():
    body = b"{}"
    for header in ("x-github-event", "x-github-delivery"):
        headers = {k: v for k, v in headers_for(body).items() if k != header}
        answer = screen(SECRET, headers, body, None)
        assert isinstance(answer, Answer) and answer.status.startswith("400")


def test_screen_answers_a_ping_and_hands_back_anything_else_to_store():
    ping = fixture_bytes("github/ping.json")
    pong = screen(SECRET, headers_for(ping, "ping"), ping, None)
    assert isinstance(pong, Answer) and pong.status == "200 OK"
    assert pong.body["zen"] == json.loads(ping)["zen"]
    assert pong.event == ("webhook.received", {"delivery": "d-1", "gh_event": "ping"})

    opened = fixture_bytes("github/issues.opened.json")
    verdict = screen(SECRET, headers_for(opened, delivery="d-2"), opened, None)
    assert verdict == Verified("d-2", "issues", "opened", opened)
    answer = acknowledged(verdict, new=False)
    assert answer.status.startswith("202") and answer.body == {"delivery": "d-2", "duplicate": True}


def test_an_action_that_is_not_a_string_is_no_action():
    body = b'{"action": 7}'
    verdict = screen(SECRET, headers_for(body), body, None)
    assert isinstance(verdict, Verified) and verdict.action is None


def test_encoded_answers_carry_their_length():
    payload, headers = Answer("202 Accepted", {"delivery": "d"}).encoded()
    assert json.loads(payload) == {"delivery": "d"}
    assert ("Content-Length", str(len(payload))) in headers


def messages(*chunks: bytes, disconnect: bool = False):
    queue = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]
    if disconnect:
        queue[-1]["more_body"] = True
        queue.append({"type": "http.disconnect"})

    async def receive():
        return queue.pop(0)

    return receive


def test_read_body_joins_chunks_and_stops_past_the_limit():
    assert asyncio.run(read_body(messages(b"ab", b"cd", b"e"), 10)) == b"abcde"
    assert asyncio.run(read_body(messages(b"abcdef", b"ghijkl"), 10)) is None
    assert asyncio.run(read_body(messages(b""), 10)) == b""


def test_read_body_notices_a_client_that_went_away():
    try:
        asyncio.run(read_body(messages(b"ab", disconnect=True), 10))
    except ClientGone:
        pass
    else:
        raise AssertionError("a disconnect mid-body was read as a whole body")
