"""The model gateway: a real server on loopback in front of the scripted Messages API.

What a session sees through it is what the model sent, byte for byte; what the model sees is
the operator's key, never the session's pass; a pass that is unknown or revoked is refused in
the API's own error shape before anything goes upstream; and every answer's usage is counted
for the pass's work item. The readers of usage and the credential rules are pure and are
tested without a server."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.operator_config import ConfigError, parse_config
from app.gateway.access import open_model_access, upstream_for
from app.gateway.forwarding import PUBLIC_API, Upstream, presented_token, upstream_headers
from app.gateway.metering import StreamMeter, Tally, Usage, usage_of_body
from app.gateway.passes import Passes
from app.gateway.relay import ModelGateway
from app.gateway.transport import UpstreamError
from app.protocol import USAGE_FIELDS
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, ToolCall, anything, contains
from tests.fakes.messages_wire import content_blocks, message_stream
from tests.fakes.server import LiveServer
from tests.support import usage_counted, wait_for

CANARY_KEY = "sk-ant-api03-operator-canary-key-7777777777"
ITEM = "github:o/r#1"
SCRIPTED = (
    ("input_tokens", 1234),
    ("output_tokens", 56),
    ("cache_read_input_tokens", 789),
    ("cache_creation_input_tokens", 10),
)


def _body(text: str, *, stream: bool = True) -> dict[str, object]:
    return {
        "model": "claude-opus-4",
        "stream": stream,
        "max_tokens": 100,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": text}],
    }


# -- usage, read as it passes -------------------------------------------------------------


def _stream(usage: dict[str, int] | None = None) -> bytes:
    return message_stream(content_blocks(Reply("hello there")), "m", usage)


def test_a_stream_s_usage_is_its_start_with_the_delta_s_final_counts() -> None:
    meter = StreamMeter()
    meter.feed(_stream(dict(SCRIPTED)))
    assert meter.result() == Usage(1234, 56, 789, 10, requests=1)


@given(st.lists(st.integers(min_value=1, max_value=400), max_size=12))
def test_how_a_stream_is_cut_into_chunks_changes_nothing(cuts: list[int]) -> None:
    data = _stream(dict(SCRIPTED)).replace(b"\n", b"\r\n")
    meter, start = StreamMeter(), 0
    for cut in sorted(cuts):
        meter.feed(data[start:cut])
        start = max(start, cut)
    meter.feed(data[start:])
    assert meter.result() == Usage(1234, 56, 789, 10, requests=1)


def test_text_that_mentions_an_event_name_is_not_read_as_one() -> None:
    meter = StreamMeter()
    fake = json.dumps({"type": "message_delta", "usage": {"output_tokens": 999999}})
    meter.feed(_stream(dict(SCRIPTED)).replace(b"hello there", fake.encode()[1:-1]))
    assert meter.result() == Usage(1234, 56, 789, 10, requests=1)


def test_each_tool_use_block_is_one_tool_call_however_the_stream_is_cut() -> None:
    calls = (ToolCall("Bash", {"command": 'echo "tool_use"'}), ToolCall("Read", {"path": "a"}))
    data = message_stream(content_blocks(Reply('say "tool_use"', calls)), "m", dict(SCRIPTED))
    for size in (7, 64, len(data)):
        meter = StreamMeter()
        for start in range(0, len(data), size):
            meter.feed(data[start : start + size])
        assert meter.result() == Usage(1234, 56, 789, 10, requests=1, tool_calls=2)
    body = json.dumps(
        {"usage": {"input_tokens": 3}, "content": [{"type": "text"}, {"type": "tool_use"}]}
    )
    assert usage_of_body(body.encode()) == Usage(input_tokens=3, requests=1, tool_calls=1)


def test_a_body_without_usage_counts_nothing_and_a_json_answer_counts_once() -> None:
    assert usage_of_body(b'{"input_tokens": 12}') is None  # count_tokens costs nothing
    assert usage_of_body(b"not json") is None
    body = json.dumps({"type": "message", "usage": {"input_tokens": 3, "output_tokens": True}})
    assert usage_of_body(body.encode()) == Usage(input_tokens=3, requests=1)


def test_the_harness_works_from_a_request_until_an_answer_asks_for_no_tool() -> None:
    now = [100.0]
    tally = Tally(clock=lambda: now[0])
    tally.started("a")
    now[0] = 102.0
    tally.finished("a", tools=True)  # its tools run now: still working
    now[0] = 110.0
    tally.started("a")
    tally.started("a")  # a side request alongside
    now[0] = 111.0
    tally.finished("a", tools=False)  # the side one ends; the main one is in flight
    now[0] = 115.0
    tally.finished("a", tools=False)  # the turn ends
    now[0] = 500.0  # waiting for a person is not work
    assert tally.drain("a") == {"a": Usage(active_ms=15_000)}
    tally.started("a")
    now[0] = 510.0
    assert tally.drain()["a"].active_ms == 10_000  # a turn still going: up to now
    now[0] = 512.0
    tally.finished("a", tools=False)
    assert tally.drain() == {"a": Usage(active_ms=2_000)}
    assert tally.drain() == {}
    tally.started("a")  # a session that ends inside a turn: the turn ends with it
    now[0] = 520.0
    tally.close("a")
    now[0] = 900.0
    assert tally.drain() == {"a": Usage(active_ms=8_000)}
    assert tally.drain() == {}


def test_a_report_carries_exactly_the_fields_the_app_adds_up() -> None:
    assert tuple(Usage().to_json()) == USAGE_FIELDS


def test_the_tally_sums_per_item_and_a_drain_starts_again() -> None:
    tally = Tally()
    tally.add("a", Usage(1, 2, 3, 4, 1))
    tally.add("a", Usage(10, 20, 30, 40, 1))
    tally.add("b", Usage(5, requests=1))
    assert tally.drain("a") == {"a": Usage(11, 22, 33, 44, 2)}
    assert tally.drain() == {"b": Usage(5, requests=1)}
    assert tally.drain() == {}


# -- passes and credentials ------------------------------------------------------------------


def test_a_new_pass_retires_the_item_s_old_one_and_a_revoked_pass_is_nobody_s() -> None:
    passes = Passes()
    first = passes.mint(ITEM)
    second = passes.mint(ITEM)
    other = passes.mint("github:o/r#2")
    assert passes.holder(first) is None and passes.holder(second) == ITEM
    assert passes.revoke(ITEM) and passes.holder(second) is None
    assert passes.holder(other) == "github:o/r#2"
    assert passes.holder(CANARY_KEY) is None and passes.holder("") is None


def test_the_upstream_is_the_spawner_s_base_url_and_key_else_the_public_api() -> None:
    config = parse_config({})
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "ANTHROPIC_API_KEY": CANARY_KEY}
    up = upstream_for(config, env)
    assert up.base_url == "http://127.0.0.1:9"
    assert up.credential == ((b"x-api-key", CANARY_KEY.encode()),)
    assert CANARY_KEY not in repr(up)
    bare = upstream_for(config, {})
    assert bare.base_url == PUBLIC_API and not bare.has_credential
    bearer = upstream_for(config, {"ANTHROPIC_AUTH_TOKEN": "tok"})
    assert bearer.credential == ((b"authorization", b"Bearer tok"),)


def test_a_key_file_wins_and_one_that_cannot_be_read_names_its_key_and_file(
    tmp_path: Path,
) -> None:
    key = tmp_path / "key"
    key.write_text(CANARY_KEY + "\n")
    config = parse_config({"routing": {"sandbox": {"apiKeyFile": str(key)}}}, "cli-config.yaml")
    assert upstream_for(config, {"ANTHROPIC_API_KEY": "other"}).credential == (
        (b"x-api-key", CANARY_KEY.encode()),
    )
    key.unlink()
    with pytest.raises(ConfigError) as refused:
        upstream_for(config, {})
    assert "cli-config.yaml" in str(refused.value)
    assert "routing.sandbox.apiKeyFile" in str(refused.value) and str(key) in str(refused.value)
    with pytest.raises(ConfigError, match=r"cli-config.yaml: routing.sandbox.shareLogin"):
        parse_config({"routing": {"sandbox": {"shareLogin": "perhaps"}}}, "cli-config.yaml")


def test_a_session_s_credential_headers_never_go_upstream() -> None:
    up = Upstream("http://x:8080", ((b"x-api-key", b"real"),), "env")
    sent = upstream_headers(
        [
            (b"Host", b"127.0.0.1:9"),
            (b"x-api-key", b"pass"),
            (b"authorization", b"Bearer pass"),
            (b"accept-encoding", b"gzip"),
            (b"anthropic-version", b"2023-06-01"),
            (b"connection", b"keep-alive"),
            (b"content-length", b"99"),
        ],
        up,
        12,
    )
    assert sent == [
        (b"host", b"x:8080"),
        (b"anthropic-version", b"2023-06-01"),
        (b"x-api-key", b"real"),
        (b"accept-encoding", b"identity"),
        (b"content-length", b"12"),
    ]
    assert upstream_headers([], Upstream("https://api.openai.com/v1"), 0)[0] == (
        b"host",
        b"api.openai.com",
    )
    assert Upstream("https://api.openai.com/v1").target(b"/responses?a=1#f") == (
        b"/v1/responses?a=1"
    )
    assert Upstream("http://[::1]:8080").origin[2] == b"[::1]:8080"
    for unusable in ("ftp://x", "http://x:port", "no url"):
        with pytest.raises(UpstreamError):  # the request is answered 502, as any upstream failure
            Upstream(unusable).target(b"/v1/messages")
    assert presented_token([(b"Authorization", b"Bearer abc")]) == "abc"
    assert presented_token([(b"x-api-key", b"k"), (b"authorization", b"Bearer b")]) == "k"


# -- the real server -----------------------------------------------------------------------


def model_script() -> list[Step]:
    return [
        Step(contains("first"), Reply("one", usage=SCRIPTED)),
        Step(contains("second"), Reply("two")),
        Step(anything, Reply("more")),
    ]


MODEL_SCRIPT = model_script


@pytest.fixture
def gateway(model: FakeAnthropic) -> Iterator[ModelGateway]:
    up = Upstream(model.url, ((b"x-api-key", CANARY_KEY.encode()),), "env")
    with ModelGateway(up) as gw:
        yield gw


def test_a_stream_arrives_as_the_model_sent_it_and_its_usage_is_counted(
    gateway: ModelGateway, model: FakeAnthropic
) -> None:
    token = gateway.passes.mint(ITEM)
    with httpx.Client(timeout=30) as client:
        answer = client.post(
            gateway.url + "/v1/messages?beta=true",
            headers={"x-api-key": token, "anthropic-version": "2023-06-01"},
            json=_body("first"),
        )
        second = client.post(
            gateway.url + "/v1/messages",
            headers={"x-api-key": token},
            json=_body("second", stream=False),
        )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream"
    first = model.main_requests()[0]
    served = message_stream(first.reply, "claude-opus-4", dict(SCRIPTED))
    # the ids inside differ per answer; the shape, length and events are the model's
    assert len(answer.content) == len(served)
    assert [line for line in answer.text.splitlines() if line.startswith("event:")] == [
        line for line in served.decode().splitlines() if line.startswith("event:")
    ]
    assert second.status_code == 200 and second.json()["content"][0]["text"] == "two"
    assert usage_counted(gateway.tally, 2) == {ITEM: Usage(1234 + 10, 56 + 5, 789, 10, requests=2)}
    credentials = {r.credential for r in model.snapshot()}
    assert credentials == {CANARY_KEY}  # the operator's key upstream, never the pass
    assert first.query == "beta=true" and first.headers["anthropic-version"] == "2023-06-01"


def test_a_wrong_or_revoked_pass_is_refused_before_anything_goes_upstream(
    gateway: ModelGateway, model: FakeAnthropic
) -> None:
    token = gateway.passes.mint(ITEM)
    gateway.passes.revoke(ITEM)
    with httpx.Client(timeout=30) as client:
        answers = [
            client.post(gateway.url + "/v1/messages", headers={"x-api-key": t}, json=_body("x"))
            for t in (token, CANARY_KEY, "")
        ]
        bearer = client.post(
            gateway.url + "/v1/messages",
            headers={"authorization": f"Bearer {token}"},
            json=_body("x"),
        )
    for answer in [*answers, bearer]:
        assert answer.status_code == 401
        assert answer.json()["type"] == "error"
        assert answer.json()["error"]["type"] == "authentication_error"
    assert model.snapshot() == [] and gateway.tally.drain() == {}


def test_an_item_whose_budget_is_spent_is_refused_in_the_api_s_shape_until_allowed(
    gateway: ModelGateway, model: FakeAnthropic
) -> None:
    token = gateway.passes.mint(ITEM)
    other = gateway.passes.mint("github:o/r#2")
    gateway.refuse_spent(ITEM, "the-loop: budget spent (tokens 10k of 10k).")
    with httpx.Client(timeout=30) as client:
        refused = [
            client.post(gateway.url + "/v1/messages", headers={"x-api-key": token}, json=_body("x"))
            for _ in range(2)
        ]
        served = client.post(
            gateway.url + "/v1/messages", headers={"x-api-key": other}, json=_body("first")
        )
        gateway.allow(ITEM)  # a launch the App asked for after a raise
        again = client.post(
            gateway.url + "/v1/messages", headers={"x-api-key": token}, json=_body("second")
        )
    for answer in refused:
        assert answer.status_code == 400
        assert answer.json() == {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "the-loop: budget spent (tokens 10k of 10k).",
            },
        }
    assert served.status_code == 200 and again.status_code == 200  # other items: served
    assert gateway.spent_refusals(ITEM) == 0  # allowed again: the count starts over
    assert len(model.main_requests()) == 2  # the refused ones never went upstream


def test_only_the_messages_api_is_forwarded_with_the_operator_s_key(
    gateway: ModelGateway, model: FakeAnthropic
) -> None:
    token = gateway.passes.mint(ITEM)
    key = {"x-api-key": token}
    with httpx.Client(timeout=30) as client:
        counted_tokens = client.post(
            gateway.url + "/v1/messages/count_tokens?beta=true", headers=key, json=_body("c")
        )
        refused = [
            client.get(gateway.url + "/v1/models", headers=key),
            client.get(gateway.url + "/v1/messages/batches", headers=key),
            client.post(gateway.url + "/v1/files", headers=key, content=b"x"),
            client.get(gateway.url + "/v1/messages", headers=key),
            client.post(gateway.url + "/v1/messages/../files", headers=key, json={}),
        ]
    assert counted_tokens.status_code == 200 and counted_tokens.json()["input_tokens"] > 0
    for answer in refused:
        assert answer.status_code == 403, answer.request.url
        assert answer.json()["error"]["type"] == "permission_error"
    assert [r.path for r in model.snapshot()] == ["/v1/messages/count_tokens"]


def test_a_gateway_without_a_credential_says_what_to_set(model: FakeAnthropic) -> None:
    with ModelGateway(Upstream(model.url)) as gw:
        token = gw.passes.mint(ITEM)
        answer = httpx.post(gw.url + "/v1/messages", headers={"x-api-key": token}, json={})
    assert answer.status_code == 401 and "ANTHROPIC_API_KEY" in answer.json()["error"]["message"]
    assert model.snapshot() == []


def test_an_upstream_that_cannot_be_reached_is_a_502_in_the_api_s_shape() -> None:
    up = Upstream("http://127.0.0.1:9", ((b"x-api-key", b"k"),), "env")
    with ModelGateway(up) as gw:
        token = gw.passes.mint(ITEM)
        answer = httpx.post(
            gw.url + "/v1/messages", headers={"x-api-key": token}, json={}, timeout=30
        )
    assert answer.status_code == 502 and answer.json()["error"]["type"] == "api_error"


def test_twenty_streams_at_once_are_each_relayed_whole_and_counted(
    gateway: ModelGateway, model: FakeAnthropic
) -> None:
    import concurrent.futures

    tokens = {f"github:o/r#{n}": gateway.passes.mint(f"github:o/r#{n}") for n in range(20)}

    def ask(item: str) -> int:
        with httpx.Client(timeout=60) as client:
            answer = client.post(
                gateway.url + "/v1/messages", headers={"x-api-key": tokens[item]}, json=_body(item)
            )
        assert answer.text.rstrip().endswith('data: {"type": "message_stop"}')
        return answer.status_code

    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        assert list(pool.map(ask, tokens)) == [200] * 20
    found = usage_counted(gateway.tally, 20)
    assert set(found) == set(tokens)
    assert sum(u.requests for u in found.values()) == 20


def test_a_restarted_spawner_keeps_its_port_and_the_passes_of_live_sessions_only(
    model: FakeAnthropic, tmp_path: Path
) -> None:
    config = parse_config({})
    env = {"ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": CANARY_KEY}
    reported: list[tuple[str, str | None, dict[str, int]]] = []

    def emit(event: str, item: str | None, **fields: int) -> None:
        reported.append((event, item, fields))

    before = open_model_access(config, env, emit, state_dir=tmp_path)
    assert before is not None
    alive = before.for_session("github:o/r#1").key
    ended = before.for_session("github:o/r#2").key
    url = before.gateway.url
    before.close()
    saved = (tmp_path / "gateway.json").read_text()
    assert alive not in saved and CANARY_KEY not in saved  # hashes only
    after = open_model_access(config, env, emit, state_dir=tmp_path, live=["github:o/r#1"])
    assert after is not None
    try:
        assert after.gateway.url == url  # the sessions' ANTHROPIC_BASE_URL still holds
        with httpx.Client(timeout=30) as client:
            kept = client.post(url + "/v1/messages", headers={"x-api-key": alive}, json=_body("k"))
            gone = client.post(url + "/v1/messages", headers={"x-api-key": ended}, json=_body("g"))
        assert kept.status_code == 200 and gone.status_code == 401
        after.end("github:o/r#1")
        refused = httpx.post(url + "/v1/messages", headers={"x-api-key": alive}, json={})
        assert refused.status_code == 401
    finally:
        after.close()
    assert [(e, i) for e, i, _ in reported] == [("session.usage", "github:o/r#1")]
    assert reported[0][2]["requests"] == 1


def test_an_answer_is_relayed_as_it_arrives_byte_for_byte() -> None:
    """The upstream holds back the second half of its stream (cut inside an event) until the
    session has the first: nothing waits for the whole answer, and nothing is changed."""
    stream = _stream(dict(SCRIPTED))
    cut = stream.index(b"input_tokens") + 5
    release = threading.Event()
    held: list[bool] = []

    def upstream(environ: dict[str, Any], start: Callable[..., Any]) -> Iterator[bytes]:
        start("200 OK", [("Content-Type", "text/event-stream")])
        yield stream[:cut]
        held.append(release.wait(30))  # False: nobody saw the first half in time
        yield stream[cut:]

    with LiveServer(upstream) as model:
        up = Upstream(model.url, ((b"x-api-key", CANARY_KEY.encode()),), "env")
        with ModelGateway(up) as gateway:
            token = gateway.passes.mint(ITEM)
            received = b""
            with (
                httpx.Client(timeout=30) as client,
                client.stream(
                    "POST", gateway.url + "/v1/messages", headers={"x-api-key": token}, json={}
                ) as answer,
            ):
                chunks = answer.iter_raw()
                while len(received) < cut:
                    received += next(chunks)
                assert not release.is_set()  # the first half arrived while the rest was held
                release.set()
                received += b"".join(chunks)
            assert received == stream and held == [True]
            assert usage_counted(gateway.tally, 1) == {ITEM: Usage(1234, 56, 789, 10, requests=1)}


def test_bodies_held_at_once_are_bounded_and_given_back(model: FakeAnthropic) -> None:
    up = Upstream(model.url, ((b"x-api-key", CANARY_KEY.encode()),), "env")
    body = json.dumps(_body("x" * 700)).encode()
    with ModelGateway(up, body_budget=len(body) + 100) as gw:
        token = gw.passes.mint(ITEM)
        host, port = "127.0.0.1", gw.port
        with socket.create_connection((host, port), timeout=30) as slow:
            head = (
                f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nx-api-key: {token}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
            )
            slow.sendall(head.encode() + body[:-10])  # most of it, held in the gateway
            wait_for(lambda: gw.held == len(body) - 10)
            crowded = httpx.post(
                gw.url + "/v1/messages", headers={"x-api-key": token}, content=body, timeout=30
            )
            assert crowded.status_code == 529
            assert crowded.json()["error"]["type"] == "overloaded_error"
            slow.sendall(body[-10:])
            answer = b""
            while b"message_stop" not in answer:
                answer += slow.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200")
        wait_for(lambda: gw.held == 0)
        later = httpx.post(
            gw.url + "/v1/messages", headers={"x-api-key": token}, content=body, timeout=30
        )
        assert later.status_code == 200


def test_a_client_that_waits_for_100_continue_is_told_to_go_on(
    gateway: ModelGateway, model: FakeAnthropic
) -> None:
    token = gateway.passes.mint(ITEM)
    body = json.dumps(_body("waiting")).encode()
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=30) as conn:
        head = (
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n"
            f"content-length: {len(body)}\r\nexpect: 100-continue\r\n\r\n"
        )
        conn.sendall(head.encode())
        assert conn.recv(65536).startswith(b"HTTP/1.1 100 ")
        conn.sendall(body)
        answer = b""
        while b"message_stop" not in answer:
            answer += conn.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200") and len(model.main_requests()) == 1
