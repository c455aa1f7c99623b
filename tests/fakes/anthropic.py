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
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
from tests.support import wait_for

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
_HIDDEN_HEADERS = frozenset({"authorization", "x-api-key", "cookie"})


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


class FakeAnthropic:
    """The scripted Messages API served on 127.0.0.1 with an ephemeral port."""

    def __init__(self, script: Iterable[Step] = ()) -> None:
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

    # lifecycle
    def start(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add(self, *steps: Step) -> None:
        """Append steps while a session runs."""
        with self._lock:
            self.steps.extend(steps)
            self.spent.extend([False] * len(steps))

    # answering (called from the handler threads)
    def answer(self, record: Recorded) -> list[dict[str, Any]]:
        """Choose the reply for a Messages request and note it on the record."""
        body = record.body if isinstance(record.body, dict) else {}
        record.turn = user_turn(body)
        if not record.has_tools:
            record.kind = "side"
            record.reply = content_blocks(side_reply(body))
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
                    self._answered[key] = (index, content_blocks(step.reply))
                    return self._answered[key]
        return None, content_blocks(Reply(text=UNMATCHED_TEXT))

    def record_other(self, record: Recorded) -> None:
        with self._lock:
            self.requests.append(record)

    # what tests read
    def snapshot(self) -> list[Recorded]:
        with self._lock:
            return list(self.requests)

    def main_requests(self) -> list[Recorded]:
        return [r for r in self.snapshot() if r.kind == "main"]

    def side_requests(self) -> list[Recorded]:
        return [r for r in self.snapshot() if r.kind == "side"]

    @property
    def unmatched(self) -> list[Recorded]:
        return [r for r in self.main_requests() if r.step is None]

    def other_paths(self) -> list[str]:
        return sorted({f"{r.method} {r.path}" for r in self.snapshot() if r.kind == "other"})

    def user_texts(self) -> list[str]:
        """The text of every main request's last user turn, in arrival order."""
        return [r.turn.text for r in self.main_requests()]

    def pending(self) -> list[str]:
        with self._lock:
            return [s.name or f"step {i}" for i, s in enumerate(self.steps) if not self.spent[i]]

    def wait_for_request(
        self, predicate: Callable[[Recorded], bool], timeout: float = 90.0
    ) -> Recorded:
        """The first recorded request satisfying `predicate`, waiting up to `timeout`; on
        timeout the error lists what the model was shown, so a failure reads plainly."""
        try:
            return wait_for(
                lambda: next((r for r in self.snapshot() if predicate(r)), None), timeout=timeout
            )
        except AssertionError:
            raise AssertionError(
                f"no matching request within {timeout}s\n{self.describe()}"
            ) from None

    def wait_for_step(self, index: int, timeout: float = 90.0) -> Recorded:
        """The main request that spent step `index`."""
        return self.wait_for_request(lambda r: r.kind == "main" and r.step == index, timeout)

    def describe(self) -> str:
        """A readable account of every request: which step each spent, what it showed."""
        lines = [f"pending steps: {self.pending()}"]
        for r in self.snapshot():
            if r.kind == "main":
                label = "main, UNMATCHED" if r.step is None else f"main, step {r.step}"
                roles = [m.get("role") for m in r.body.get("messages", [])]
                turn = r.turn.text[-300:]
                lines.append(f"  [{label}] messages {roles}, last user turn: {turn!r}")
            else:
                lines.append(f"  [{r.kind}] {r.method} {r.path}")
        return "\n".join(lines)

    def assert_script_done(self) -> None:
        """Fail unless every step was spent and no main request went unmatched."""
        if self.pending() or self.unmatched:
            raise AssertionError(f"script not followed\n{self.describe()}")


def _handler_for(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
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
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            credential = headers.get("x-api-key") or headers.get("authorization") or ""
            headers = {k: v for k, v in headers.items() if k not in _HIDDEN_HEADERS}
            record = Recorded(
                self.command, parts.path, parts.query, headers, body, time.monotonic()
            )
            record.credential = credential
            return record

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("request-id", "req_" + uuid.uuid4().hex[:20])
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, data: Any, status: int = 200) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def do_POST(self) -> None:
            record = self._record()
            body = record.body if isinstance(record.body, dict) else {}
            if record.path.rstrip("/") == "/v1/messages":
                blocks = fake.answer(record)
                model = str(body.get("model") or "claude-scripted")
                usage = record.usage or None
                record.served = served_usage(usage)
                if body.get("stream"):
                    self._send(200, message_stream(blocks, model, usage), "text/event-stream")
                else:
                    self._json(message_json(blocks, model, usage))
            elif record.path.rstrip("/") == "/v1/messages/count_tokens":
                record.kind = "count_tokens"
                fake.record_other(record)
                self._json({"input_tokens": max(1, len(json.dumps(body)) // 4)})
            else:
                fake.record_other(record)
                self._json({})

        def do_GET(self) -> None:
            fake.record_other(self._record())
            self._json({})

        do_PUT = do_PATCH = do_DELETE = do_GET

    return Handler
