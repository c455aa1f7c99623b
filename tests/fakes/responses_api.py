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
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
from tests.support import wait_for

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


class FakeResponses:
    """The scripted Responses API served on 127.0.0.1 with an ephemeral port; its base URL
    (what a provider's `base_url` names) is `url + "/v1"`."""

    def __init__(self, script: Iterable[Step] = (), unknown_models: Iterable[str] = ()) -> None:
        self.unknown_models = frozenset(unknown_models)  # answered 404 model_not_found
        self.steps: list[Step] = list(script)
        self.spent: list[bool] = [False] * len(self.steps)
        self.requests: list[Recorded] = []
        self._answered: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def start(self) -> FakeResponses:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeResponses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *steps: Step) -> None:
        with self._lock:
            self.steps.extend(steps)
            self.spent.extend([False] * len(steps))

    def answer(self, record: Recorded) -> list[dict[str, Any]]:
        body = record.body if isinstance(record.body, dict) else {}
        record.turn = user_turn_of(body)
        if not record.tool_names:
            record.kind = "side"
            record.reply = output_items(side_reply(body))
        else:
            record.kind = "main"
            record.step, record.reply = self._main_reply(body, record.turn)
            if record.step is not None:
                record.usage = dict(self.steps[record.step].reply.usage)
        with self._lock:
            self.requests.append(record)
        return record.reply

    def _main_reply(self, body: dict[str, Any], turn: UserTurn) -> tuple[int | None, list[Any]]:
        key = _digest(body)
        with self._lock:
            if key in self._answered:
                return self._answered[key]
            for index, step in enumerate(self.steps):
                if not self.spent[index] and step.match(turn):
                    self.spent[index] = True
                    self._answered[key] = (index, output_items(step.reply))
                    return self._answered[key]
        return None, output_items(Reply(UNMATCHED_TEXT))

    def record_other(self, record: Recorded) -> None:
        with self._lock:
            self.requests.append(record)

    def snapshot(self) -> list[Recorded]:
        with self._lock:
            return list(self.requests)

    def main_requests(self) -> list[Recorded]:
        return [r for r in self.snapshot() if r.kind == "main"]

    @property
    def unmatched(self) -> list[Recorded]:
        return [r for r in self.main_requests() if r.step is None]

    def other_paths(self) -> list[str]:
        return sorted({f"{r.method} {r.path}" for r in self.snapshot() if r.kind == "other"})

    def pending(self) -> list[str]:
        with self._lock:
            return [s.name or f"step {i}" for i, s in enumerate(self.steps) if not self.spent[i]]

    def wait_for_request(
        self, predicate: Callable[[Recorded], bool], timeout: float = 90.0
    ) -> Recorded:
        try:
            return wait_for(
                lambda: next((r for r in self.snapshot() if predicate(r)), None), timeout=timeout
            )
        except AssertionError:
            raise AssertionError(
                f"no matching request within {timeout}s\n{self.describe()}"
            ) from None

    def wait_for_step(self, index: int, timeout: float = 90.0) -> Recorded:
        return self.wait_for_request(lambda r: r.kind == "main" and r.step == index, timeout)

    def describe(self) -> str:
        lines = [f"pending steps: {self.pending()}"]
        for r in self.snapshot():
            if r.kind == "main":
                label = "main, UNMATCHED" if r.step is None else f"main, step {r.step}"
                lines.append(f"  [{label}] last turn: {r.turn.text[-300:]!r}")
            else:
                shape = sorted(r.body) if isinstance(r.body, dict) else type(r.body).__name__
                lines.append(f"  [{r.kind}] {r.method} {r.path} {shape}")
        return "\n".join(lines)

    def assert_script_done(self) -> None:
        if self.pending() or self.unmatched:
            raise AssertionError(f"script not followed\n{self.describe()}")


def _handler_for(fake: FakeResponses) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def _record(self) -> Recorded:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
            headers = {k.lower(): v for k, v in self.headers.items()}
            credential = headers.get("authorization") or headers.get("x-api-key") or ""
            headers = {k: v for k, v in headers.items() if k not in _HIDDEN_HEADERS}
            path = urlsplit(self.path).path
            record = Recorded(self.command, path, headers, body, time.monotonic())
            record.credential = credential
            return record

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("x-request-id", "req_" + uuid.uuid4().hex[:20])
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            record = self._record()
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
                self._send(404, json.dumps({"error": error}).encode(), "application/json")
            elif record.path.rstrip("/").endswith("/responses"):
                items = fake.answer(record)
                model = str(body.get("model") or "scripted")
                usage = record.usage or None
                record.served = served_usage(usage)
                if body.get("stream"):
                    self._send(200, response_stream(items, model, usage), "text/event-stream")
                else:
                    payload = json.dumps(response_json(items, model, usage)).encode()
                    self._send(200, payload, "application/json")
            else:
                fake.record_other(record)
                self._send(200, b"{}", "application/json")

        def do_GET(self) -> None:
            fake.record_other(self._record())
            self._send(200, b"{}", "application/json")

        do_PUT = do_PATCH = do_DELETE = do_GET

    return Handler
