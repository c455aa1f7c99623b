"""What a request's fields and content may hold (`reach.refusal`, `contents.py`,
`bodies.py`), pure: content is walked wherever the APIs nest it, only known fields, block and
source types pass, media by URL or by `file_id` and stored objects of the operator's account
are refused naming what was refused, and a body is parsed within bounds with no key twice.
The shapes Claude Code and Codex send pass (the real harnesses drive the gateway in
test_gateway_claude.py and tests/e2e)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.gateway.bodies import BodyError, parse_body
from app.gateway.reach import Refused, kept_betas, refusal
from app.gateway.wires import MESSAGES, RESPONSES, Wire

EVIL = "https://evil.example/a.png"
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def _judge(body: dict[str, Any], wire: Wire = MESSAGES, allowed: frozenset[str] = frozenset()):
    return refusal(json.dumps(body).encode(), wire, allowed)


def _messages(*content: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-opus-4",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": list(content)}],
        **extra,
    }


def _responses(*items: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-scripted", "stream": True, "input": list(items), **extra}


def _said(refused: Refused | None, *words: str) -> Refused:
    assert refused is not None, "the body passed"
    for word in words:
        assert word in refused.reason, refused.reason
    return refused


# -- Claude Code's and Codex's own shapes pass ---------------------------------------------


def test_what_claude_code_sends_passes() -> None:
    cached = {"type": "ephemeral"}
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": cached}]
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [{"type": "text", "text": "ok"}, {"type": "image", "source": PNG}],
        "is_error": False,
        "cache_control": cached,
    }
    body = {
        "model": "claude-opus-4",
        "max_tokens": 32000,
        "stream": True,
        "system": system,
        "metadata": {"user_id": "{}"},
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "temperature": 1,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cached}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "…", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "xx"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"url": EVIL}},
                ],
            },
            {"role": "user", "content": [result]},
        ],
    }
    assert _judge(body) is None


def test_what_codex_sends_passes() -> None:
    body = _responses(
        {
            "type": "message",
            "id": "m1",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA==", "detail": "auto"},
            ],
        },
        {"role": "user", "content": "a message without its type"},
        {"type": "reasoning", "id": "r1", "summary": [{"type": "summary_text", "text": "…"}],
         "encrypted_content": "gAAA"},
        {"type": "function_call", "id": "f1", "call_id": "c1", "name": "exec_command",
         "arguments": "{}", "status": "completed"},
        {"type": "function_call_output", "id": "o1", "call_id": "c1", "output": "done"},
        {"type": "message", "id": "m2", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "ok", "annotations": []}]},
        instructions="You are Codex.",
        tools=[{"type": "function", "name": "exec_command", "parameters": {}}],
        tool_choice="auto",
        parallel_tool_calls=False,
        reasoning={"summary": "auto"},
        store=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="k",
        client_metadata={"x": "y"},
    )  # fmt: skip
    assert _judge(body, RESPONSES) is None


# -- the holes -----------------------------------------------------------------------------


def test_an_image_by_url_inside_a_document_s_content_is_refused() -> None:
    image = {"type": "image", "source": {"type": "url", "url": EVIL}}
    document = {"type": "document", "source": {"type": "content", "content": [image]}}
    refused = _said(_judge(_messages(document)), "image given by URL", "download")
    assert refused.kind == "media_by_url"
    inline = {"type": "document", "source": {"type": "content", "content": [
        {"type": "text", "text": "a"}, {"type": "image", "source": PNG}]}}  # fmt: skip
    assert _judge(_messages(inline)) is None


def test_media_nested_anywhere_the_api_nests_content_is_walked() -> None:
    image = {"type": "image", "source": {"type": "url", "url": EVIL}}
    document = {"type": "document", "source": {"type": "content", "content": [image]}}
    deep = {"type": "tool_result", "tool_use_id": "t", "content": [document]}
    assert _said(_judge(_messages(deep))).kind == "media_by_url"
    search = {"type": "search_result", "source": "s", "title": "t", "content": [image]}
    assert _said(_judge(_messages(search))).kind == "media_by_url"
    assert _said(_judge(_messages(system=[image]))).kind == "media_by_url"
    part = {"type": "input_image", "image_url": EVIL}
    output = {"type": "function_call_output", "call_id": "c", "output": [part]}
    assert _said(_judge(_responses(output), RESPONSES)).kind == "media_by_url"


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "file", "file_id": "file_011"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_011"}},
        {"type": "document", "source": {"type": "base64", "file_id": "file_011"}},
        {"type": "container_upload", "file_id": "file_011"},
    ],
)
def test_a_file_id_source_naming_the_operator_s_files_is_refused(block: dict[str, Any]) -> None:
    refused = _said(_judge(_messages(block)), "file_id", "operator")
    assert refused.kind == "account_object"


@pytest.mark.parametrize(
    "part",
    [
        {"type": "input_image", "file_id": "file-1"},
        {"type": "input_file", "file_id": "file-1"},
        {"type": "input_file", "file_url": "https://evil.example/a.pdf"},
        {"type": "input_image", "image_url": {"url": EVIL}},  # an object, not a string
        {"type": "input_image", "image_url": EVIL.upper()},
    ],
)
def test_a_responses_part_naming_media_outside_the_request_is_refused(
    part: dict[str, Any],
) -> None:
    message = {"type": "message", "role": "user", "content": [part]}
    refused = _said(_judge(_responses(message), RESPONSES))
    assert refused.kind in ("media_by_url", "account_object")


def test_container_skills_and_a_container_without_code_execution_are_refused() -> None:
    skills = {"id": "c", "skills": [{"type": "custom", "skill_id": "skill_1", "version": "1"}]}
    allowed = frozenset({"code_execution"})
    _said(_judge(_messages(container=skills), allowed=allowed), "container.skills")
    _said(_judge(_messages(container="container_1")), "container")
    assert _judge(_messages(container="container_1"), allowed=allowed) is None


@pytest.mark.parametrize("field", ["previous_response_id", "conversation", "prompt"])
def test_a_responses_stored_object_of_the_account_is_refused(field: str) -> None:
    refused = _said(_judge(_responses(**{field: "resp_123"}), RESPONSES), field, "stored")
    assert refused.kind == "account_object"
    reference = {"type": "item_reference", "id": "msg_1"}
    assert _said(_judge(_responses(reference), RESPONSES)).kind == "account_object"


def test_an_upper_case_beta_is_dropped_as_its_lower_case_is() -> None:
    value = b"claude-code-20250219,MCP-CLIENT-2025-11-20, Web-Fetch-2025-09-10,Files-API-2025-04-14"
    assert kept_betas(value, frozenset()) == b"claude-code-20250219"
    kept = kept_betas(value, frozenset({"web_fetch"}))
    assert kept == b"claude-code-20250219,Web-Fetch-2025-09-10"


def test_a_server_tool_s_blocks_pass_only_when_the_operator_allows_the_tool() -> None:
    use = {"type": "server_tool_use", "id": "s", "name": "web_fetch", "input": {"url": EVIL}}
    reply = {"role": "assistant", "content": [use]}
    body = {**_messages(), "messages": [{"role": "user", "content": "x"}, reply]}
    assert _said(_judge(body), "web_fetch", "routing.sandbox.modelTools").kind == "server_tool"
    assert _judge(body, allowed=frozenset({"web_fetch"})) is None
    result = {"type": "web_search_tool_result", "tool_use_id": "s", "content": []}
    assert _said(_judge(_messages(result))).kind == "server_tool"
    assert _said(_judge(_messages({"type": "mcp_tool_use", "id": "m"}))).kind == "mcp"
    call = {"type": "web_search_call", "id": "ws", "status": "completed"}
    assert _said(_judge(_responses(call), RESPONSES)).kind == "server_tool"


@pytest.mark.parametrize(
    ("body", "wire", "named"),
    [
        (_messages(betas=["x"]), MESSAGES, "'betas' of the request"),
        (_messages({"type": "text", "text": "a", "url": EVIL}), MESSAGES, "'url' of a text"),
        (_messages({"type": "image", "source": {**PNG, "origin": "x"}}), MESSAGES, "'origin'"),
        (_messages({"type": "image", "source": {"type": "remote"}}), MESSAGES, "'remote'"),
        (_messages({"type": "hologram"}), MESSAGES, "'hologram'"),
        (_responses(background=True), RESPONSES, "'background' of the request"),
        (
            _responses({"type": "function_call", "call_id": "c", "server": "x"}),
            RESPONSES,
            "'server'",
        ),
        (_responses({"type": "input_video"}), RESPONSES, "'input_video'"),
    ],
)
def test_a_field_or_type_the_gateway_does_not_know_is_refused_naming_it(
    body: dict[str, Any], wire: Wire, named: str
) -> None:
    refused = _said(_judge(body, wire), named, "does not know")
    assert refused.kind in ("unknown_field", "unknown_type")


# -- the body's bounds ---------------------------------------------------------------------


def test_a_key_given_twice_anywhere_is_refused_naming_it() -> None:
    twice = (
        b'{"model": "m", "tools": [{"type": "web_fetch_20250910"}], "tools": [], "messages": []}'
    )
    refused = _said(refusal(twice, MESSAGES, frozenset()), "'tools' twice")
    assert (refused.kind, refused.what) == ("duplicate_key", "tools")
    inner = b'{"messages": [{"role": "user", "content": "a", "content": "b"}]}'
    assert _said(refusal(inner, MESSAGES, frozenset())).what == "content"
    assert parse_body(b'{"a": {"b": 1}, "c": {"b": 2}}') == {"a": {"b": 1}, "c": {"b": 2}}


def test_a_body_past_its_bounds_is_refused_before_it_is_built() -> None:
    with pytest.raises(BodyError) as many:
        parse_body(b'{"a": [' + b"{}," * 1000 + b"{}]}", max_elements=500)
    assert many.value.kind == "too_many"
    with pytest.raises(BodyError) as deep:
        parse_body(b'{"a":' * 10 + b"1" + b"}" * 10, max_depth=8)
    assert deep.value.kind == "too_deep"
    assert parse_body(b'{"a":' * 8 + b"1" + b"}" * 8, max_depth=8)
    # Commas and brackets inside strings are text, not values.
    text = b'{"a": "' + b",[{" * 1000 + b'"}'
    assert parse_body(text, max_elements=500) == {"a": ",[{" * 1000}
    with pytest.raises(BodyError) as nested:
        parse_body(b"[" * 100_000 + b"]" * 100_000)
    assert nested.value.kind in ("too_deep", "not_json")
    for bad in (b"{nope", b"[1]", b"\xff\xfe", b""):
        with pytest.raises(BodyError) as refused:
            parse_body(bad)
        assert refused.value.kind == "not_json"
