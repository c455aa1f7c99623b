"""A scripted Anthropic Messages API on loopback, for driving the real `claude` binary offline.

Scripting a session
-------------------
A test lists `Step`s; each pairs a matcher on the *last* `role: user` message of a request
with the reply the "model" gives (text, then tool calls with generated ids)::

    script = [
        Step(contains("make the notes"), Reply("On it.", (write(f"{work}/notes.txt", "hi\n"),))),
        Step(tool_result_for("Write"), Reply("Done.")),
    ]
    session = scripted_claude(script, "please make the notes", workdir=work)  # claude_support
    done = session.wait_step(1)          # the request that spent step 1 (it carries the result)
    session.api.assert_script_done()     # every step spent, nothing unmatched

The matcher sees a `UserTurn`: the message's text blocks, its `tool_result` blocks (tool
name resolved from the assistant turn that called it) and both joined as `.text`. A pasted
follow-up arrives as a text block; so does a Stop hook's feedback ("Stop hook feedback:
[<command>]: <its stderr>", inside a `<system-reminder>` from 2.1.3xx), so `contains(<the
reason>)` matches either. `role: system` messages that the binary interleaves are ignored.
A main request (one with `tools`) is answered by the EARLIEST pending step whose matcher
accepts it, and that step is spent. A request repeating the messages of one already
answered (the binary retrying) gets the same reply again without spending a step. A main
request nothing matches gets `UNMATCHED_TEXT` with `end_turn` and stays in `unmatched`, so
`assert_script_done()` fails with an account of every request.

Requests without tools (`tools: []`) are the binary's side requests: they get
`side_reply(body)` — an object of the requested JSON schema when the body carries
`output_config.format` (the session-title request does), else `SIDE_TEXT` — and never
spend a step.

What the binary calls (claude 2.1.197 and 2.1.332, with `claude_support.claude_env`)
------------------------------------------------------------------------------------
Only `POST /v1/messages?beta=true`, always `"stream": true`: the main loop (model
`claude-opus-*`, every tool) and, once per session, the title request (model
`claude-haiku-*`, `tools: []`, JSON schema `{"title": string}`). Nothing else was seen in
either version: no count_tokens, model list or feature-flag call. For safety the fake still
answers `POST /v1/messages/count_tokens` (`{"input_tokens": n}`), a non-streaming
`/v1/messages` (the same message as JSON), and any other path with 200 `{}`, recording it
(`other_paths()`). Headers are recorded without `x-api-key`/`authorization`; the credential
a request bore is kept apart (`Recorded.credential`, never printed by `describe`).

Streams are SSE: `message_start`, per block `content_block_start` / `content_block_delta`
(`text_delta`, or one `input_json_delta` with the whole input) / `content_block_stop`, then
`message_delta` (stop_reason `tool_use` when the reply calls tools, else `end_turn`; usage)
and `message_stop`, sent with a Content-Length on a keep-alive HTTP/1.1 connection.

Environment: see tests/claude_support.py (`prepare_home`, `claude_env`): the fake's URL as
`ANTHROPIC_BASE_URL`, a dummy `ANTHROPIC_API_KEY` approved in `~/.claude.json`, trust and
the bypass pre-accept written by the product's own `pretrust`, auto-update and telemetry off.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.messages_wire import (
    SIDE_TEXT,
    content_blocks,
    message_json,
    message_stream,
    served_usage,
    side_reply,
)
from tests.fakes.model_script import (
    Matcher,
    Reply,
    Step,
    ToolCall,
    ToolResult,
    UserTurn,
    anything,
    bash,
    contains,
    matches,
    read,
    tool_result_for,
    user_turn,
    write,
)
from tests.fakes.scripted_model import ScriptedHandler, ScriptedModel

__all__ = [  # the script's vocabulary, so a test imports everything from here
    "SIDE_TEXT",
    "UNMATCHED_TEXT",
    "FakeAnthropic",
    "Matcher",
    "Recorded",
    "Reply",
    "Step",
    "ToolCall",
    "ToolResult",
    "UserTurn",
    "anything",
    "bash",
    "contains",
    "matches",
    "read",
    "tool_result_for",
    "write",
]

UNMATCHED_TEXT = "(no script step matched)"


@dataclass
class Recorded:
    """One request the fake received; `kind` is main, side, count_tokens or other."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    at: float
    kind: str = "other"
    turn: UserTurn = field(default_factory=UserTurn)
    step: int | None = None  # index of the script step it spent or replayed
    reply: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)  # the step's scripted counts
    served: dict[str, int] = field(default_factory=dict)  # the usage the answer reported
    credential: str = field(default="", repr=False)  # the x-api-key / authorization it bore

    @property
    def has_tools(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("tools"))


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()


class FakeAnthropic(ScriptedModel):
    """The scripted Messages API served on 127.0.0.1 with an ephemeral port."""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def turn_of(self, body: dict[str, Any]) -> UserTurn:
        return user_turn(body)

    def is_main(self, record: Recorded) -> bool:
        return record.has_tools

    def side_reply(self, body: dict[str, Any]) -> Reply:
        return side_reply(body)

    def render(self, reply: Reply) -> list[dict[str, Any]]:
        return content_blocks(reply)

    def digest(self, body: dict[str, Any]) -> str:
        return _digest(body)

    def unmatched_reply(self) -> Reply:
        return Reply(text=UNMATCHED_TEXT)

    def describe_main(self, record: Recorded) -> str:
        roles = [m.get("role") for m in record.body.get("messages", [])]
        return f"messages {roles}, last user turn: {record.turn.text[-300:]!r}"


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(ScriptedHandler):
        def record(self) -> Recorded:
            body, headers, credential = self.read_request()
            parts = urlsplit(self.path)
            record = Recorded(
                self.command, parts.path, parts.query, headers, body, time.monotonic()
            )
            record.credential = credential
            return record

        def do_POST(self) -> None:
            record = self.record()
            body = record.body if isinstance(record.body, dict) else {}
            if record.path.rstrip("/") == "/v1/messages":
                blocks = fake.answer(record)
                model = str(body.get("model") or "claude-scripted")
                usage = record.usage or None
                record.served = served_usage(usage)
                if body.get("stream"):
                    stream = message_stream(blocks, model, usage)
                    self.send_payload(200, stream, "text/event-stream")
                else:
                    self.send_json(message_json(blocks, model, usage))
            elif record.path.rstrip("/") == "/v1/messages/count_tokens":
                record.kind = "count_tokens"
                fake.record_other(record)
                self.send_json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
            else:
                fake.record_other(record)
                self.send_json({})

    Handler.fake = fake
    return Handler
