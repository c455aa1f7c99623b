"""The model gateway speaking OpenAI's Responses API (Codex sessions), in front of the scripted
Responses API: the same relay as the Messages API's, with the operator's OpenAI key upstream,
the session's pass checked and never sent on, errors in OpenAI's shape and the usage of
`response.completed` counted into the same per-item fields (cached input apart)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.operator_config import ConfigError, parse_config
from app.gateway.access import open_model_access, openai_upstream_for
from app.gateway.forwarding import Upstream
from app.gateway.metering import StreamMeter, Usage, usage_of_body
from app.gateway.relay import ModelGateway
from app.gateway.wires import RESPONSES, responses_counts
from tests.fakes.model_script import Reply, Step, anything, contains
from tests.fakes.responses_api import FakeResponses, exec_command
from tests.fakes.responses_wire import output_items, response_json, response_stream
from tests.support import usage_counted

OPENAI_CANARY = "sk-proj-operator-canary-key-5555555555"
ITEM = "github:o/r#1"
SCRIPTED = (("input_tokens", 1500), ("output_tokens", 40), ("cached_tokens", 1200))


def _body(text: str, *, stream: bool = True) -> dict[str, object]:
    return {
        "model": "gpt-scripted",
        "stream": stream,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
        ],
    }


def _stream() -> bytes:
    return response_stream(output_items(Reply("hi", (exec_command("ls"),))), "m", dict(SCRIPTED))


def test_a_responses_usage_counts_cached_input_apart() -> None:
    usage = {
        "input_tokens": 1500,
        "input_tokens_details": {"cached_tokens": 1200},
        "output_tokens": 40,
    }
    assert responses_counts(usage) == {
        "input_tokens": 300,
        "cache_read_input_tokens": 1200,
        "output_tokens": 40,
    }
    assert responses_counts({"input_tokens": True}) == {}
    meter = StreamMeter(RESPONSES)
    meter.feed(_stream())
    assert meter.result() == Usage(300, 40, 1200, 0, requests=1, tool_calls=1)  # exec_command
    whole = response_json(output_items(Reply("x")), "m", dict(SCRIPTED))
    assert usage_of_body(httpx.Response(200, json=whole).content, RESPONSES) == Usage(
        300, 40, 1200, 0, requests=1
    )


@given(st.lists(st.integers(min_value=1, max_value=3000), max_size=12))
def test_how_a_responses_stream_is_cut_changes_nothing(cuts: list[int]) -> None:
    data = _stream()
    meter, start = StreamMeter(RESPONSES), 0
    for cut in sorted(cuts):
        meter.feed(data[start:cut])
        start = max(start, cut)
    meter.feed(data[start:])
    assert meter.result() == Usage(300, 40, 1200, 0, requests=1, tool_calls=1)


def test_the_openai_upstream_is_the_spawner_s_base_and_key_else_the_public_api(
    tmp_path: Path,
) -> None:
    config = parse_config({})
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1/", "OPENAI_API_KEY": OPENAI_CANARY}
    up = openai_upstream_for(config, env)
    assert up.base_url == "http://127.0.0.1:9/v1"
    assert up.credential == ((b"authorization", f"Bearer {OPENAI_CANARY}".encode()),)
    assert OPENAI_CANARY not in repr(up)
    bare = openai_upstream_for(config, {})
    assert bare.base_url == "https://api.openai.com/v1" and not bare.has_credential
    key = tmp_path / "openai.key"
    key.write_text("sk-from-file\n")
    filed = parse_config({"routing": {"sandbox": {"openaiKeyFile": str(key)}}})
    assert openai_upstream_for(filed, env).credential == (
        (b"authorization", b"Bearer sk-from-file"),
    )
    missing = parse_config({"routing": {"sandbox": {"openaiKeyFile": str(tmp_path / "nope")}}})
    with pytest.raises(ConfigError, match=r"routing\.sandbox\.openaiKeyFile"):
        openai_upstream_for(missing, env)


MODEL_WIRE = FakeResponses


def model_script() -> list[Step]:
    return [
        Step(
            contains("first"), Reply("one", (exec_command("the-loop phase next"),), usage=SCRIPTED)
        ),
        Step(anything, Reply("more")),
    ]


MODEL_SCRIPT = model_script


@pytest.fixture
def responses_gateway(model: FakeResponses) -> Iterator[ModelGateway]:
    openai = Upstream(model.base_url, ((b"authorization", f"Bearer {OPENAI_CANARY}".encode()),))
    with ModelGateway(Upstream("http://127.0.0.1:9"), responses=openai) as gw:
        yield gw


def test_a_responses_stream_arrives_as_sent_with_the_operator_s_key_upstream(
    responses_gateway: ModelGateway, model: FakeResponses
) -> None:
    token = responses_gateway.passes.mint(ITEM)
    with httpx.Client(timeout=30) as client:
        answer = client.post(
            responses_gateway.url + "/v1/responses",
            headers={"authorization": f"Bearer {token}"},
            json=_body("first"),
        )
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/event-stream"
    events = [ln[7:] for ln in answer.text.splitlines() if ln.startswith("event: ")]
    assert events[0] == "response.created" and events[-1] == "response.completed"
    assert '"name": "exec_command"' in answer.text and "the-loop phase next" in answer.text
    (seen,) = model.main_requests()
    assert seen.path == "/v1/responses" and seen.credential == f"Bearer {OPENAI_CANARY}"
    assert seen.turn.texts == ("first",)
    drained = usage_counted(responses_gateway.tally, 1)
    assert drained.keys() == {ITEM}
    used = drained[ITEM]
    counted = (used.input_tokens, used.output_tokens, used.cache_read_input_tokens)
    assert (*counted, used.requests, used.tool_calls) == (300, 40, 1200, 1, 1)


def test_a_refused_responses_request_reads_as_openai_s_error(
    responses_gateway: ModelGateway, model: FakeResponses
) -> None:
    token = responses_gateway.passes.mint(ITEM)
    with httpx.Client(timeout=30) as client:
        stranger = client.post(
            responses_gateway.url + "/v1/responses",
            headers={"authorization": f"Bearer {OPENAI_CANARY}"},
            json=_body("x"),
        )
        other = client.get(
            responses_gateway.url + "/v1/models", headers={"authorization": f"Bearer {token}"}
        )
    assert stranger.status_code == 401
    assert stranger.json()["error"]["type"] == "authentication_error"
    assert "type" not in stranger.json()  # OpenAI's shape, not Anthropic's
    assert other.status_code == 403
    assert model.snapshot() == []


def test_without_an_openai_credential_the_gateway_says_what_to_set(model: FakeResponses) -> None:
    with ModelGateway(Upstream("http://127.0.0.1:9"), responses=Upstream(model.base_url)) as gw:
        token = gw.passes.mint(ITEM)
        answer = httpx.post(
            gw.url + "/v1/responses", headers={"authorization": f"Bearer {token}"}, json={}
        )
    assert answer.status_code == 401 and "OPENAI_API_KEY" in answer.json()["error"]["message"]
    assert model.snapshot() == []


def test_an_openai_key_alone_starts_the_gateway(model: FakeResponses) -> None:
    config = parse_config({"routing": {"sandbox": {"shareLogin": True}}})
    env = {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": OPENAI_CANARY}
    access = open_model_access(config, env, lambda *a, **k: None)
    assert access is not None
    try:
        given = access.for_session(ITEM)
        answer = httpx.post(
            given.url + "/v1/responses",
            headers={"authorization": f"Bearer {given.key}"},
            json=_body("first"),
            timeout=30,
        )
        assert answer.status_code == 200
    finally:
        access.close()
