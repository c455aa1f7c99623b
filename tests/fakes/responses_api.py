"""A scripted OpenAI Responses API on loopback, for driving the real `codex` binary offline.

Scripting works as in tests/fakes/anthropic.py: a test lists `Step`s, each a matcher on what
the model is shown since it last spoke (the trailing user messages and `function_call_output`
items of the request's `input`, flattened into a `UserTurn`, tool names resolved from the
calls) and the `Reply` it gives (text, then function calls)::

    script = [
        Step(contains("make the notes"), Reply("On it.", (exec_command("touch notes"),))),
        Step(tool_result_for("exec_command"), Reply("Done.")),
    ]

A request offering tools is a main request: the EARLIEST pending step whose matcher accepts it
answers, and is spent; a request repeating the input of one already answered (a retry)
gets the same reply again. One nothing matches gets `UNMATCHED_TEXT` and stays in
`unmatched`. A request without tools is a side request and gets `SIDE_TEXT`.

What codex 0.171.0 calls (a custom provider, `wire_api = "responses"`): `POST
{base_url}/responses` with `"stream": true`, its credential as a bearer token; any other path
is answered 200 `{}` and recorded (`other_paths()`). Headers are recorded without the
credential, which is kept apart (`Recorded.credential`).

Streams are SSE, as the API sends them: `response.created`, per output item
`response.output_item.added`, `response.output_text.delta` (messages), and
`response.output_item.done`, then `response.completed` with the whole output and `usage`
(`input_tokens`, `input_tokens_details.cached_tokens`, `output_tokens`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.fakes.messages_wire import schema_example
from tests.fakes.model_script import (
    Reply,
    Step,
    UserTurn,
    anything,
    contains,
    matches,
    tool_result_for,
)
from tests.fakes.responses_wire import (
    exec_command,
    input_items,
    output_items,
    response_json,
    response_stream,
    served_usage,
    user_messages,
    user_turn_of,
)
from tests.fakes.scripted_model import ScriptedHandler, ScriptedModel

__all__ = [
    "SIDE_TEXT",
    "UNMATCHED_TEXT",
    "FakeResponses",
    "Recorded",
    "Reply",
    "Step",
    "anything",
    "contains",
    "exec_command",
    "matches",
    "tool_result_for",
]

UNMATCHED_TEXT = "(no script step matched)"
SIDE_TEXT = "Scripted session"
_HIDDEN_HEADERS = frozenset({"authorization", "x-api-key", "cookie", "openai-api-key"})


@dataclass
class Recorded:
    """One request the fake received; `kind` is main, side or other."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float
    kind: str = "other"
    turn: UserTurn = field(default_factory=UserTurn)
    step: int | None = None
    reply: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)  # the step's scripted counts
    served: dict[str, Any] = field(default_factory=dict)  # the usage the answer reported
    credential: str = field(default="", repr=False)

    @property
    def users(self) -> list[str]:
        """Every user message of the request's input, in order."""
        return user_messages(self.body) if isinstance(self.body, dict) else []

    @property
    def tool_names(self) -> list[str]:
        """The tools the model was offered: the request's `tools`, and those of any
        `additional_tools` input item (how Codex offers tools to the models it knows)."""
        if not isinstance(self.body, dict):
            return []
        offered = list(self.body.get("tools") or [])
        for item in input_items(self.body):
            if item.get("type") == "additional_tools":
                for group in item.get("tools") or []:
                    offered += group.get("tools") or [] if isinstance(group, dict) else []
        return [str(t.get("name")) for t in offered if isinstance(t, dict)]


def side_reply(body: dict[str, Any]) -> Reply:
    """A request without tools: JSON of the asked schema when it asks for structured output
    (`text.format` of type `json_schema`), else `SIDE_TEXT`."""
    text = body.get("text")
    form = text.get("format") if isinstance(text, dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        return Reply(json.dumps(schema_example(form.get("schema"))))
    return Reply(SIDE_TEXT)


def _digest(body: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(input_items(body), sort_keys=True).encode()).hexdigest()


class FakeResponses(ScriptedModel):
    """The scripted Responses API served on 127.0.0.1 with an ephemeral port; its base URL
    (what a provider's `base_url` names) is `url + "/v1"`."""

    def __init__(self, script: Iterable[Step] = (), unknown_models: Iterable[str] = ()) -> None:
        self.unknown_models = frozenset(unknown_models)  # answered 404 model_not_found
        super().__init__(script)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    def turn_of(self, body: dict[str, Any]) -> UserTurn:
        return user_turn_of(body)

    def is_main(self, record: Recorded) -> bool:
        return bool(record.tool_names)

    def side_reply(self, body: dict[str, Any]) -> Reply:
        return side_reply(body)

    def render(self, reply: Reply) -> list[dict[str, Any]]:
        return output_items(reply)

    def digest(self, body: dict[str, Any]) -> str:
        return _digest(body)

    def unmatched_reply(self) -> Reply:
        return Reply(UNMATCHED_TEXT)

    def describe_main(self, record: Recorded) -> str:
        return f"last turn: {record.turn.text[-300:]!r}"


def _handler_for(fake: FakeResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(ScriptedHandler):
        credential_headers = ("authorization", "x-api-key")
        hidden_headers = _HIDDEN_HEADERS
        request_id_header = "x-request-id"

        def record(self) -> Recorded:
            body, headers, credential = self.read_request()
            path = urlsplit(self.path).path
            record = Recorded(self.command, path, headers, body, time.monotonic())
            record.credential = credential
            return record

        def do_POST(self) -> None:
            record = self.record()
            body = record.body if isinstance(record.body, dict) else {}
            if body.get("model") in fake.unknown_models:
                fake.record_other(record)
                message = (
                    f"The model `{body['model']}` does not exist or you do not have access to it."
                )
                error = {
                    "type": "invalid_request_error",
                    "code": "model_not_found",
                    "message": message,
                }
                self.send_json({"error": error}, 404)
            elif record.path.rstrip("/").endswith("/responses"):
                items = fake.answer(record)
                model = str(body.get("model") or "scripted")
                usage = record.usage or None
                record.served = served_usage(usage)
                if body.get("stream"):
                    stream = response_stream(items, model, usage)
                    self.send_payload(200, stream, "text/event-stream")
                else:
                    self.send_json(response_json(items, model, usage))
            else:
                fake.record_other(record)
                self.send_json({})

    Handler.fake = fake
    return Handler
