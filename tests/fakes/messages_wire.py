"""Messages API response shapes for the fake Anthropic API: one reply as content blocks, as a
complete JSON message, or as the SSE stream (`message_start`, per block
`content_block_start`/`content_block_delta`/`content_block_stop`, `message_delta` with the
stop reason and usage, `message_stop`); and the answer to a side request. Pure."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.fakes.model_script import Reply

SIDE_TEXT = "Scripted session"


def _message_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


def content_blocks(reply: Reply) -> list[dict[str, Any]]:
    """The reply as Messages API content blocks; tool ids are filled in."""
    blocks: list[dict[str, Any]] = []
    if reply.text or not reply.tools:
        blocks.append({"type": "text", "text": reply.text})
    for call in reply.tools:
        use_id = call.id or "toolu_" + uuid.uuid4().hex[:24]
        blocks.append({"type": "tool_use", "id": use_id, "name": call.name, "input": call.input})
    return blocks


def _usage(output_tokens: int) -> dict[str, int]:
    return {
        "input_tokens": 10,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def served_usage(usage: dict[str, int] | None = None) -> dict[str, int]:
    """The counts an answer reports: the scripted ones over the fixed defaults."""
    return {**_usage(5), **(usage or {})}


def message_json(
    blocks: list[dict[str, Any]], model: str, usage: dict[str, int] | None = None
) -> dict[str, Any]:
    """A complete (non-streaming) Messages API response; `usage` replaces the fixed counts."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return {
        "id": _message_id(),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": served_usage(usage),
    }


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _block_events(index: int, block: dict[str, Any]) -> list[str]:
    start: dict[str, Any]
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return [
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": start},
        ),
        _sse(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        ),
        _sse("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


def message_stream(
    blocks: list[dict[str, Any]], model: str, usage: dict[str, int] | None = None
) -> bytes:
    """The same message as a Messages API SSE stream. With scripted `usage`, as the API
    sends it: the input side in `message_start` (output 1), the final output count alone in
    `message_delta`."""
    whole = message_json(blocks, model, usage)
    start = {**whole, "content": [], "stop_reason": None, "usage": {**whole["usage"]}}
    start["usage"]["output_tokens"] = 1
    final = {"output_tokens": whole["usage"]["output_tokens"]} if usage else whole["usage"]
    events = [_sse("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(blocks):
        events += _block_events(index, block)
    delta = {"stop_reason": whole["stop_reason"], "stop_sequence": None}
    events.append(_sse("message_delta", {"type": "message_delta", "delta": delta, "usage": final}))
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return "".join(events).encode()


def schema_example(schema: Any) -> Any:
    """A value of the JSON schema's shape: every object property filled, strings with
    `SIDE_TEXT`, so a structured-output request parses."""
    if not isinstance(schema, dict):
        return SIDE_TEXT
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: schema_example(sub) for name, sub in properties.items()}
    return {"boolean": False, "number": 0, "integer": 0, "array": [], "null": None}.get(
        str(kind), SIDE_TEXT
    )


def side_reply(body: dict[str, Any]) -> Reply:
    """The answer to a request without tools: JSON of the asked schema when the request
    carries a structured-output format (the session-title request does), else short text."""
    config = body.get("output_config")
    form = (config.get("format") if isinstance(config, dict) else None) or body.get("output_format")
    if isinstance(form, dict) and form.get("type") == "json_schema":
        return Reply(text=json.dumps(schema_example(form.get("schema"))))
    return Reply(text=SIDE_TEXT)
