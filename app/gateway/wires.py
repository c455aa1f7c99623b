"""The APIs the model gateway speaks, and only what differs between them. Pure.

The relay core (`relay.py`) is one: passes, bodies, streaming, errors. A `Wire` says which
requests of a session belong to one API, where they go upstream, the shape of an error the
harness reads as that API's own, and how a streamed or whole answer's `usage` is read into
the gateway's counts:

- `messages`: Anthropic's Messages API (Claude Code). `POST /v1/messages` and its token
  counter; the upstream base holds no path (`https://api.anthropic.com`).
- `responses`: OpenAI's Responses API (Codex CLI, its provider's `base_url` being the
  gateway's `/v1`). `POST /v1/responses`; the upstream base holds the version
  (`https://api.openai.com/v1`), as OpenAI's own clients name it. Its `usage` counts cached
  input inside `input_tokens`; the gateway counts it apart, as the Messages API does, so the
  same fields mean the same thing whichever harness ran: `input_tokens` uncached input,
  `cache_read_input_tokens` the cached part.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Counts = dict[str, int]


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def messages_counts(usage: Any) -> Counts:
    """The counted fields a Messages API `usage` object holds (others, and nonsense, left out)."""
    if not isinstance(usage, dict):
        return {}
    names = ("input_tokens", "output_tokens", "cache_read_input_tokens")
    found = {name: _count(usage.get(name)) for name in (*names, "cache_creation_input_tokens")}
    return {name: value for name, value in found.items() if value is not None}


def responses_counts(usage: Any) -> Counts:
    """A Responses API `usage` object in the gateway's fields: cached input apart."""
    if not isinstance(usage, dict):
        return {}
    details = usage.get("input_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    given = _count(usage.get("input_tokens"))
    output = _count(usage.get("output_tokens"))
    counts: Counts = {}
    if given is not None:
        counts["input_tokens"] = max(0, given - (cached or 0))
    if cached is not None:
        counts["cache_read_input_tokens"] = cached
    if output is not None:
        counts["output_tokens"] = output
    return counts


def _messages_event(data: dict[str, Any]) -> Counts | None:
    """Counts an SSE event of a Messages stream carries: the start's, then the delta's."""
    if data.get("type") == "message_start":
        message = data.get("message")
        return messages_counts(message.get("usage")) if isinstance(message, dict) else None
    if data.get("type") == "message_delta":
        return messages_counts(data.get("usage"))
    return None


def _responses_event(data: dict[str, Any]) -> Counts | None:
    """Counts of a Responses stream: only its last event, `response.completed`, has them."""
    if data.get("type") in ("response.completed", "response.incomplete"):
        response = data.get("response")
        return responses_counts(response.get("usage")) if isinstance(response, dict) else None
    return None


def _messages_tools(data: dict[str, Any]) -> int:
    """Tool calls a whole Messages answer asks for: its `tool_use` content blocks."""
    content = data.get("content")
    blocks = content if isinstance(content, list) else []
    return sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use")


def _responses_tools(data: dict[str, Any]) -> int:
    """Tool calls a whole Responses answer asks for: its `function_call` output items."""
    output = data.get("output")
    items = output if isinstance(output, list) else []
    return sum(1 for i in items if isinstance(i, dict) and i.get("type") == "function_call")


def _messages_error(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def _responses_error(kind: str, message: str) -> bytes:
    return json.dumps({"error": {"type": kind, "code": kind, "message": message}}).encode()


@dataclass(frozen=True)
class Wire:
    """One API the gateway forwards."""

    name: str
    routes: frozenset[tuple[bytes, bytes]]  # (method, path) a session may ask for
    prefix: bytes  # the part of a session's path the upstream base already ends with
    events: tuple[bytes, ...]  # SSE event names that carry usage
    event_counts: Callable[[dict[str, Any]], Counts | None]
    body_counts: Callable[[Any], Counts]  # of a whole JSON answer's `usage`
    body_tools: Callable[[dict[str, Any]], int]  # tool calls a whole JSON answer asks for
    tool_event: bytes  # the SSE event that starts one tool call the harness will make...
    tool_marker: bytes  # ...when its data line holds this (the block's or item's type)
    error_body: Callable[[str, str], bytes]
    public_base: str
    forwarded_text: str  # what a refused path is told

    def upstream_target(self, target: bytes) -> bytes:
        """The session's request target as appended to the upstream base's path."""
        return target[len(self.prefix) :] if target.startswith(self.prefix) else target


MESSAGES = Wire(
    name="messages",
    routes=frozenset({(b"POST", b"/v1/messages"), (b"POST", b"/v1/messages/count_tokens")}),
    prefix=b"",
    events=(b"message_start", b"message_delta"),
    event_counts=_messages_event,
    body_counts=messages_counts,
    body_tools=_messages_tools,
    tool_event=b"content_block_start",
    tool_marker=b'"tool_use"',  # a server tool's block is `"server_tool_use"`: not counted
    error_body=_messages_error,
    public_base="https://api.anthropic.com",
    forwarded_text="POST /v1/messages and /v1/messages/count_tokens",
)
RESPONSES = Wire(
    name="responses",
    routes=frozenset({(b"POST", b"/v1/responses")}),
    prefix=b"/v1",
    events=(b"response.completed", b"response.incomplete"),
    event_counts=_responses_event,
    body_counts=responses_counts,
    body_tools=_responses_tools,
    tool_event=b"response.output_item.added",
    tool_marker=b'"function_call"',
    error_body=_responses_error,
    public_base="https://api.openai.com/v1",
    forwarded_text="POST /v1/responses",
)
WIRES: tuple[Wire, ...] = (MESSAGES, RESPONSES)


def _path(target: bytes) -> bytes:
    return target.split(b"?", 1)[0].rstrip(b"/")


def wire_for(method: bytes, target: bytes) -> Wire | None:
    """The API a request belongs to, or None when the gateway forwards no such request."""
    key = (method.upper(), _path(target))
    return next((wire for wire in WIRES if key in wire.routes), None)


def shape_for(target: bytes) -> Wire:
    """Whose error shape a request gets, forwarded or not: the API its path looks like."""
    path = _path(target)
    return RESPONSES if path.startswith(b"/v1/responses") else MESSAGES


def not_forwarded() -> str:
    return "the model gateway forwards only " + "; ".join(w.forwarded_text for w in WIRES)
