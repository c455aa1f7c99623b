"""OpenAI Responses API shapes for the scripted fake (tests/fakes/responses_api.py): what the
model was shown, flattened from a request's `input` items into a `UserTurn`; and one reply as
output items, as a complete response and as the SSE stream (`response.created`, per item
`response.output_item.added` / `response.output_text.delta` / `response.output_item.done`,
then `response.completed` carrying the output and `usage`). Pure."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

from tests.fakes.model_script import Reply, ToolCall, ToolResult, UserTurn

# The calling side of a conversation: items the model produced.
_MODEL_ITEMS = frozenset({"function_call", "reasoning", "custom_tool_call", "local_shell_call"})
# Usage a step may script (the API's own names); unset ones keep the fixed defaults.
DEFAULT_USAGE = {"input_tokens": 10, "output_tokens": 5, "cached_tokens": 0}


def _item_text(content: Any) -> str:
    """The text of a message item's `content` (a string or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _output_text(output: Any) -> str:
    """A `function_call_output`'s output: a string, or a list of text parts."""
    return output if isinstance(output, str) else _item_text(output)


def _is_model_item(item: dict[str, Any]) -> bool:
    if item.get("type") in _MODEL_ITEMS:
        return True
    return item.get("type", "message") == "message" and item.get("role") == "assistant"


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    found = body.get("input")
    if isinstance(found, str):
        return [{"type": "message", "role": "user", "content": found}]
    return [i for i in found or [] if isinstance(i, dict)] if isinstance(found, list) else []


def user_turn_of(body: dict[str, Any]) -> UserTurn:
    """What the model is shown since it last spoke: the trailing user messages and function
    call outputs of `input` (developer and system messages are left out), with each output's
    tool name resolved from the call that asked for it."""
    items = input_items(body)
    names = {
        str(i.get("call_id")): str(i.get("name")) for i in items if i.get("type") == "function_call"
    }
    trailing: list[dict[str, Any]] = []
    for item in reversed(items):
        if _is_model_item(item):
            break
        trailing.append(item)
    texts: list[str] = []
    results: list[ToolResult] = []
    for item in reversed(trailing):
        kind = item.get("type", "message")
        if kind == "message" and item.get("role") == "user":
            texts.append(_item_text(item.get("content")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            results.append(
                ToolResult(call_id, names.get(call_id, ""), _output_text(item.get("output")))
            )
    return UserTurn(tuple(texts), tuple(results))


def user_messages(body: dict[str, Any]) -> list[str]:
    """Every user message of the request's `input`, in order."""
    return [
        _item_text(i.get("content"))
        for i in input_items(body)
        if i.get("type", "message") == "message" and i.get("role") == "user"
    ]


def exec_command(cmd: str) -> ToolCall:
    """Codex's shell tool: runs `cmd` and returns its output."""
    return ToolCall("exec_command", {"cmd": cmd})


def output_items(reply: Reply) -> list[dict[str, Any]]:
    """The reply as Responses API output items: a message, then function calls."""
    items: list[dict[str, Any]] = []
    if reply.text or not reply.tools:
        items.append(
            {
                "type": "message",
                "id": "msg_" + uuid.uuid4().hex[:24],
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        )
    for call in reply.tools:
        items.append(
            {
                "type": "function_call",
                "id": "fc_" + uuid.uuid4().hex[:24],
                "call_id": call.id or "call_" + uuid.uuid4().hex[:24],
                "name": call.name,
                "arguments": json.dumps(call.input),
                "status": "completed",
            }
        )
    return items


def served_usage(scripted: dict[str, int] | None = None) -> dict[str, Any]:
    """The `usage` object an answer reports: the scripted counts over the fixed defaults."""
    counts = {**DEFAULT_USAGE, **(scripted or {})}
    return {
        "input_tokens": counts["input_tokens"],
        "input_tokens_details": {"cached_tokens": counts["cached_tokens"]},
        "output_tokens": counts["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": counts["input_tokens"] + counts["output_tokens"],
    }


def response_json(
    items: Sequence[dict[str, Any]], model: str, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    """A complete response object."""
    return {
        "id": "resp_" + uuid.uuid4().hex[:24],
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": list(items),
        "usage": served_usage(usage),
    }


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n"


def _item_events(index: int, item: dict[str, Any]) -> list[str]:
    if item["type"] == "message":
        opened = {**item, "status": "in_progress", "content": []}
        text = item["content"][0]["text"]
        deltas = [
            _sse(
                "response.output_text.delta",
                {"item_id": item["id"], "output_index": index, "content_index": 0, "delta": text},
            )
        ]
    else:
        opened = {**item, "status": "in_progress", "arguments": ""}
        deltas = []
    return [
        _sse("response.output_item.added", {"output_index": index, "item": opened}),
        *deltas,
        _sse("response.output_item.done", {"output_index": index, "item": item}),
    ]


def response_stream(
    items: Sequence[dict[str, Any]], model: str, usage: dict[str, int] | None = None
) -> bytes:
    """The same response as the Responses API's SSE stream."""
    whole = response_json(items, model, usage)
    started = {**whole, "status": "in_progress", "output": [], "usage": None}
    events = [_sse("response.created", {"response": started})]
    for index, item in enumerate(items):
        events += _item_events(index, item)
    events.append(_sse("response.completed", {"response": whole}))
    return "".join(events).encode()
