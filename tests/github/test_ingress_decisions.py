"""The webhook path's decisions as plain functions: what a request gets before, and after,
its body is read. Both fronts (WSGI and ASGI) answer with exactly these."""

from __future__ import annotations

import asyncio
import json

from githubkit.webhooks import sign

from app.github.webhooks import (
    MAX_BODY,
    Answer,
    Verified,
    acknowledged,
    precheck,
    screen,
    too_slow,
)
from app.runtime.asgi import BodyTooSlow, ClientGone, Deadlines, read_body
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
    lane = "Codertocat/Hello-World#1"  # the issue it is about: its fair turn's lane
    assert verdict == Verified("d-2", "issues", "opened", opened, lane)
    answer = acknowledged(verdict, new=False)
    assert answer.status.startswith("202") and answer.body == {"delivery": "d-2", "duplicate": True}


def test_an_action_that_is_not_a_string_is_no_action():
    body = b'{"action": 7}'
    verdict = screen(SECRET, headers_for(body, "push"), body, None)
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


def test_header_values_are_cut_before_anything_keeps_them():
    body = b"{}"
    long = {**headers_for(body), "x-github-delivery": "d" * 8000, "x-github-event": "e" * 8000}
    forged = screen(SECRET, {**long, "x-hub-signature-256": "sha256=00"}, body, "10.0.0.1")
    assert isinstance(forged, Answer) and forged.event is not None
    fields = forged.event[1]
    assert len(fields["delivery"]) == len(fields["gh_event"]) == 100
    big = precheck("POST", {**long, "content-length": str(MAX_BODY + 1)})
    assert isinstance(big, Answer) and big.event is not None
    assert len(big.event[1]["delivery"]) == 100


def test_signed_bodies_under_headers_github_never_sends_are_refused():
    body = b'{"zen": "x"}'
    for header, value in (("x-github-delivery", "d" * 65), ("x-github-event", "Issues; DROP")):
        answer = screen(SECRET, {**headers_for(body), header: value}, body, None)
        assert isinstance(answer, Answer) and answer.status.startswith("400")
        assert answer.kind == "bad-headers"


def routed_bodies() -> dict[str, bytes]:
    return {
        "issues": fixture_bytes("github/issues.labeled.json"),
        "issue_comment": fixture_bytes("github/issue_comment.created.with-installation.json"),
        "installation": fixture_bytes("github/installation.created.json"),
        "installation_repositories": fixture_bytes("github/installation_repositories.added.json"),
    }


def test_a_routed_body_is_refused_under_any_other_routed_event_name():
    bodies = routed_bodies()
    for event, body in bodies.items():
        assert isinstance(screen(SECRET, headers_for(body, event), body, None), Verified)
        for other in bodies.keys() - {event}:
            answer = screen(SECRET, headers_for(body, other), body, None)
            assert isinstance(answer, Answer) and answer.status.startswith("400"), (event, other)
            assert answer.kind == "shape-mismatch" and "X-GitHub-Event" in answer.body["error"]


def test_every_routed_event_has_a_shape_and_unrouted_events_are_not_checked():
    from app.github.shapes import SHAPES
    from app.runtime.event_routes import ROUTES

    assert {event for event, _action in ROUTES} <= SHAPES.keys()
    body = fixture_bytes("github/issues.labeled.json")
    assert isinstance(screen(SECRET, headers_for(body, "project_card"), body, None), Verified)


def test_a_body_that_does_not_arrive_in_time_is_too_slow():
    async def never():
        await asyncio.sleep(3600)

    try:
        asyncio.run(Deadlines(0.05).read(never, 10))
    except BodyTooSlow:
        pass
    else:
        raise AssertionError("a body that never came was read")
    assert asyncio.run(Deadlines(5).read(messages(b"ab", b"c"), 10)) == b"abc"
    answer = too_slow({"x-github-delivery": "slow-1"})
    assert answer.status.startswith("408") and answer.kind == "too-slow"


def test_the_git_door_wants_a_session_token_as_basic_auth_and_streams_a_bounded_body():
    import base64

    from app.ingress import doors as edge

    git = edge.door_for("/git/o/r.git/git-receive-pack")
    assert git.credential is edge.Credential.SESSION_BASIC and git.streamed
    assert edge.SPAWNER_MAX_BODY < git.max_body == edge.GIT_MAX_BODY
    assert edge.door_for("/gitx").credential is edge.Credential.NONE
    too_big = edge.declared_length({"content-length": str(edge.GIT_MAX_BODY + 1)}, git)
    assert isinstance(too_big, edge.Refusal) and too_big.status == 413

    def basic(text: str) -> dict[str, str]:
        return {"authorization": "Basic " + base64.b64encode(text.encode()).decode()}

    assert edge.basic_password(basic("the-loop-session:tlss_abc")) == "tlss_abc"
    assert edge.basic_password(basic("user:pa:ss")) == "pa:ss"
    for bad in (basic("nopassword"), basic("user:"), {"authorization": "Basic !!"}, {}):
        assert edge.basic_password(bad) is None
    assert edge.basic_password({"authorization": "Bearer tlss_abc"}) is None
    assert ("WWW-Authenticate", 'Basic realm="the-loop git"') in edge.NO_SESSION.headers


def test_each_door_asks_for_its_credential_and_caps_its_body():
    from app.ingress import doors as edge

    spawner, slack, other = (edge.door_for(p) for p in ("/spawner/v1/jobs", "/slack/events", "/x"))
    assert (spawner.credential, spawner.max_body) == (edge.Credential.BEARER, 1024 * 1024)
    assert slack.credential is edge.Credential.SLACK and other.credential is edge.Credential.NONE
    assert edge.door_for("/spawner/v1x").credential is edge.Credential.NONE
    assert edge.declared_length({"content-length": str(1024 * 1024 + 1)}, spawner) == edge.Refusal(
        413, "the body may be at most 1048576 bytes", "too-large"
    )
    assert edge.bearer({"authorization": "Bearer "}) is None
    assert edge.bearer({"authorization": "Basic abc"}) is None
    now = 1_800_000_000
    fresh = {"x-slack-signature": "v0=ab", "x-slack-request-timestamp": str(now - 10)}
    assert edge.slack_headers_problem(fresh, now) is None
    stale = {**fresh, "x-slack-request-timestamp": str(now - 301)}
    assert edge.slack_headers_problem(stale, now).reason == "slack-stale"  # type: ignore[union-attr]
    unsigned = edge.slack_headers_problem({}, now)
    assert unsigned is not None and unsigned.status == 401


def test_the_heap_built_at_start_up_is_out_of_the_collectors_reach(tmp_path):
    """A full collection walks every tracked object; what the App built at start-up is
    frozen, so a collection under a flood walks only what requests made."""
    import gc

    from app.config.process_settings import load_settings
    from app.runtime.asgi import create_asgi_app

    settings = load_settings(
        {
            "GITHUB_WEBHOOK_SECRET": "s",
            "DATABASE_URL": f"sqlite:///{tmp_path / 'the-loop.db'}",
            "THE_LOOP_STATE_DIR": str(tmp_path),
            "THE_LOOP_CONFIG": str(tmp_path / "none.yaml"),
            "THE_LOOP_INBOX_WORKERS": "0",
        },
        dotenv=None,
    )
    gc.unfreeze()
    try:
        app = create_asgi_app(settings, wsgi_threads=1)
        assert gc.get_freeze_count() > 10_000
        app.state.close()
    finally:
        gc.unfreeze()
