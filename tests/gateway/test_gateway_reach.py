"""What a session's request may make the model provider's servers do: through a real gateway on
loopback in front of the scripted Messages and Responses APIs, a request that names MCP, a
server tool the operator did not allow, or media by URL is refused 403 in its API's own error
shape and never reaches the model; an allowed tool and ordinary requests go on as before. And
a session that leaves mid-stream still has the stream's final usage counted."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config.operator_config import ConfigError, parse_config
from app.gateway.access import open_model_access
from app.gateway.forwarding import Upstream
from app.gateway.metering import Usage
from app.gateway.reach import kept_betas, refusal, tool_name
from app.gateway.relay import ModelGateway
from app.gateway.wires import MESSAGES, RESPONSES
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything
from tests.fakes.messages_wire import content_blocks, message_stream
from tests.fakes.responses_api import FakeResponses
from tests.fakes.server import LiveServer
from tests.support import wait_for

KEY = "sk-ant-api03-operator-canary-key-8888888888"
ITEM = "github:o/r#7"
MODEL_SCRIPT = [Step(anything, Reply("fine"))]
WEB_FETCH = {"type": "web_fetch_20250910", "name": "web_fetch"}
WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


def _messages(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-opus-4",
        "stream": True,
        "max_tokens": 100,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hello"}],
    }
    return {**body, **extra}


def _responses(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "gpt-scripted",
        "stream": True,
        "tools": [{"type": "function", "name": "exec_command", "parameters": {}}],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
    }
    return {**body, **extra}


# -- the rules, pure ----------------------------------------------------------------------


def test_a_tool_s_name_is_its_type_without_the_version() -> None:
    assert tool_name("web_fetch_20250910") == "web_fetch"
    assert tool_name("web_search_preview_2025_03_11") == "web_search_preview"
    assert tool_name("code_interpreter") == "code_interpreter"


def test_what_reaches_out_is_named_and_what_the_client_runs_passes() -> None:
    def why(body: dict[str, Any], wire: Any = MESSAGES, allowed: frozenset[str] = frozenset()):
        refused = refusal(json.dumps(body).encode(), wire, allowed)
        return refused.reason if refused is not None else None

    client_tools = [{"type": "bash_20250124", "name": "bash"}, {"name": "Edit", "input_schema": {}}]
    assert why(_messages(tools=client_tools)) is None
    assert "web_fetch" in (why(_messages(tools=[WEB_FETCH])) or "")
    assert why(_messages(tools=[WEB_SEARCH]), allowed=frozenset({"web_search"})) is None
    assert "MCP" in (why(_messages(mcp_servers=[{"type": "url", "url": "http://x"}])) or "")
    mcp_toolset = {"type": "mcp_toolset", "mcp_server_name": "x"}
    assert "MCP" in (why(_messages(tools=[mcp_toolset]), allowed=frozenset({"web_fetch"})) or "")
    image = {"type": "image", "source": {"type": "url", "url": "https://evil.example/a.png"}}
    inside = {"type": "tool_result", "tool_use_id": "t", "content": [image]}
    assert "URL" in (why(_messages(messages=[{"role": "user", "content": [inside]}])) or "")
    assert refusal(b"not json", MESSAGES, frozenset()) is not None
    assert refusal(b"[1, 2]", RESPONSES, frozenset()) is not None
    mcp = {"type": "mcp", "server_label": "x", "server_url": "https://evil.example/mcp"}
    assert "MCP" in (why(_responses(tools=[mcp]), RESPONSES) or "")
    for kind in ("web_search_preview", "file_search", "code_interpreter", "image_generation"):
        assert kind in (why(_responses(tools=[{"type": kind}]), RESPONSES) or "")
    shell = [{"type": "local_shell"}, {"type": "custom", "name": "apply_patch"}]
    assert why(_responses(tools=shell), RESPONSES) is None
    group = {"type": "namespace", "name": "mcp__x", "tools": [{"type": "function", "name": "f"}]}
    assert why(_responses(tools=[group]), RESPONSES) is None
    hidden = {**group, "tools": [mcp]}
    assert "MCP" in (why(_responses(tools=[hidden]), RESPONSES) or "")
    assert "unknown" in (why(_responses(tools=[{"type": "browser_2031"}]), RESPONSES) or "")
    part = {"type": "input_image", "image_url": "https://evil.example/a.png"}
    by_url = [{"type": "message", "role": "user", "content": [part]}]
    assert "URL" in (why(_responses(input=by_url), RESPONSES) or "")
    inline = [{**by_url[0], "content": [{**part, "image_url": "data:image/png;base64,AA=="}]}]
    assert why(_responses(input=inline), RESPONSES) is None


def test_betas_that_open_mcp_or_a_disallowed_server_tool_are_dropped() -> None:
    value = b"claude-code-20250219, mcp-client-2025-11-20,web-fetch-2025-09-10,oauth-2025-04-20"
    assert kept_betas(value, frozenset()) == b"claude-code-20250219,oauth-2025-04-20"
    assert kept_betas(value, frozenset({"web_fetch"})) == (
        b"claude-code-20250219,web-fetch-2025-09-10,oauth-2025-04-20"
    )


def test_model_tools_are_checked_with_the_key_and_file_named(tmp_path: Path) -> None:
    good = parse_config({"routing": {"sandbox": {"modelTools": ["web_search"]}}}, "cfg.yaml")
    assert good.routing.sandbox.model_tools == ["web_search"]
    assert parse_config({}, "cfg.yaml").routing.sandbox.model_tools == []
    for bad in ("mcp", "web_browse"):
        with pytest.raises(ConfigError) as raised:
            parse_config({"routing": {"sandbox": {"modelTools": [bad]}}}, "cfg.yaml")
        assert "cfg.yaml" in str(raised.value) and "modelTools" in str(raised.value)
        assert bad in str(raised.value)


# -- through the gateway ------------------------------------------------------------------


def _gateway(model_url: str, tools: frozenset[str] = frozenset()) -> ModelGateway:
    return ModelGateway(
        Upstream(model_url, ((b"x-api-key", KEY.encode()),), "env"), model_tools=tools
    )


def test_mcp_and_server_tools_are_refused_before_they_reach_the_model(
    model: FakeAnthropic,
) -> None:
    with _gateway(model.url) as gateway:
        token = gateway.passes.mint(ITEM)
        headers = {"x-api-key": token, "anthropic-beta": "mcp-client-2025-04-04"}
        hostile = [
            _messages(
                mcp_servers=[{"type": "url", "url": "https://evil.example/sse", "name": "e"}]
            ),
            _messages(tools=[WEB_FETCH]),
            _messages(tools=[WEB_SEARCH]),
        ]
        with httpx.Client(timeout=30) as client:
            answers = [
                client.post(gateway.url + "/v1/messages", headers=headers, json=body)
                for body in hostile
            ]
            garbage = client.post(
                gateway.url + "/v1/messages", headers={"x-api-key": token}, content=b"{nope"
            )
        for answer in [*answers, garbage]:
            assert answer.status_code == 403
            assert answer.json()["type"] == "error"
            assert answer.json()["error"]["type"] == "permission_error"
        assert "mcp_servers" in answers[0].json()["error"]["message"]
        assert "routing.sandbox.modelTools" in answers[1].json()["error"]["message"]
        assert model.snapshot() == []  # nothing reached the model
        assert gateway.reach_refused == {ITEM: 4}


def test_a_listed_server_tool_passes_and_ordinary_requests_are_unchanged(
    model: FakeAnthropic,
) -> None:
    with _gateway(model.url, frozenset({"web_search"})) as gateway:
        token = gateway.passes.mint(ITEM)
        beta = "claude-code-20250219,web-search-2025-03-05,mcp-client-2025-04-04"
        headers = {"x-api-key": token, "anthropic-beta": beta}
        with httpx.Client(timeout=30) as client:
            allowed = client.post(
                gateway.url + "/v1/messages", headers=headers, json=_messages(tools=[WEB_SEARCH])
            )
            plain = client.post(gateway.url + "/v1/messages", headers=headers, json=_messages())
            fetch = client.post(
                gateway.url + "/v1/messages", headers=headers, json=_messages(tools=[WEB_FETCH])
            )
    assert allowed.status_code == 200 and plain.status_code == 200
    assert fetch.status_code == 403
    seen = model.main_requests()
    assert len(seen) == 2
    assert seen[0].body["tools"] == [WEB_SEARCH] and seen[1].body == _messages()
    assert {r.headers["anthropic-beta"] for r in seen} == {
        "claude-code-20250219,web-search-2025-03-05"
    }


def test_a_responses_mcp_tool_is_refused_in_openai_s_shape() -> None:
    with FakeResponses([Step(anything, Reply("ok"))]) as model:
        openai = Upstream(model.base_url, ((b"authorization", b"Bearer sk-proj-canary"),))
        with ModelGateway(Upstream("http://127.0.0.1:9"), responses=openai) as gateway:
            token = gateway.passes.mint(ITEM)
            mcp = {"type": "mcp", "server_label": "e", "server_url": "https://evil.example/mcp"}
            auth = {"authorization": f"Bearer {token}"}
            with httpx.Client(timeout=30) as client:
                url = gateway.url + "/v1/responses"
                refused = client.post(url, headers=auth, json=_responses(tools=[mcp]))
                search = client.post(
                    url, headers=auth, json=_responses(tools=[{"type": "web_search"}])
                )
                assert model.snapshot() == []
                fine = client.post(url, headers=auth, json=_responses())
        assert refused.status_code == 403 and search.status_code == 403
        assert refused.json()["error"]["code"] == "permission_error"
        assert "MCP" in refused.json()["error"]["message"]
        assert fine.status_code == 200 and len(model.main_requests()) == 1


def test_the_operator_s_model_tools_reach_the_gateway(model: FakeAnthropic, tmp_path: Path) -> None:
    config = parse_config({"routing": {"sandbox": {"modelTools": ["web_fetch"]}}}, "cfg.yaml")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": model.url}
    access = open_model_access(config, env, lambda *a, **k: None, state_dir=tmp_path)
    assert access is not None
    try:
        token = access.for_session(ITEM).key
        answer = httpx.post(
            access.gateway.url + "/v1/messages",
            headers={"x-api-key": token},
            json=_messages(tools=[WEB_FETCH]),
            timeout=30,
        )
        assert answer.status_code == 200 and len(model.main_requests()) == 1
    finally:
        access.gateway.stop()


# -- a session that leaves mid-stream -----------------------------------------------------


def test_a_session_that_leaves_mid_stream_is_charged_the_stream_s_final_usage() -> None:
    """The model streams slowly; the client reads the first event and hangs up. The gateway
    reads the rest for its usage: the final output tokens (in the last event) are counted."""
    usage = {"input_tokens": 900, "output_tokens": 4321}
    stream = message_stream(content_blocks(Reply("word " * 400)), "m", usage)
    first = stream.index(b"\n\n", stream.index(b"message_start")) + 2
    gone = threading.Event()

    def upstream(environ: dict[str, Any], start: Callable[..., Any]) -> Iterator[bytes]:
        start("200 OK", [("Content-Type", "text/event-stream")])
        yield stream[:first]
        gone.wait(30)
        rest = stream[first:]
        for at in range(0, len(rest), 64):  # slowly, many writes after the session left
            time.sleep(0.005)
            yield rest[at : at + 64]

    with LiveServer(upstream) as model, _gateway(model.url) as gateway:
        token = gateway.passes.mint(ITEM)
        with (
            httpx.Client(timeout=30) as client,
            client.stream(
                "POST", gateway.url + "/v1/messages", headers={"x-api-key": token}, json={}
            ) as answer,
        ):
            received = b""
            chunks = answer.iter_raw()
            while b"message_start" not in received:
                received += next(chunks)
        gone.set()  # the client has closed its connection: the model goes on

        seen = [Usage()]

        def charged() -> Usage | None:
            found = gateway.tally.drain().get(ITEM)
            if found is not None:  # the harness's working time shows first: the clock's
                seen[0] = seen[0] + replace(found, active_ms=0)
            return seen[0] if seen[0].requests else None

        assert wait_for(charged, timeout=60) == Usage(900, 4321, requests=1)
        assert gateway.drained == 1
