"""What the two scripted model APIs share: the script of steps and how a request spends one,
the record of every request, the loopback HTTP server, and what tests read.

`fakes/anthropic.py` (the Messages API, for `claude`) and `fakes/responses_api.py` (the
Responses API, for `codex`) each subclass `ScriptedModel` and say only how their wire
differs: how a request's body shows the model's last user turn, which requests are main
ones, how a reply is rendered, and their HTTP handler's `do_POST`.

A main request is answered by the EARLIEST pending step whose matcher accepts its turn, and
that step is spent; a request repeating one already answered (the harness retrying) gets the
same reply again without spending a step; one nothing matches gets the wire's unmatched
reply and stays in `unmatched`, so `assert_script_done()` fails with an account of every
request. Requests that are not main ones never spend a step.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.model_script import Reply, Step, UserTurn
from tests.fakes.server import ServedInThread
from tests.support import wait_for

Blocks = list[dict[str, Any]]


class _ModelServer(ThreadingHTTPServer):
    """The scripted model's listening socket. Many connections may open at once (a harness's
    parallel requests, a gateway's pool, a benchmark's streams); with the standard backlog of
    5 the kernel drops the SYNs past it, and each such client waits a 1 s retransmission."""

    daemon_threads = True
    request_queue_size = 128


class ScriptedModel(ServedInThread):
    """A scripted model API on 127.0.0.1 with an ephemeral port. Subclasses provide the wire:
    `handler`, `turn_of`, `is_main`, `side_reply`, `render`, `digest`, `unmatched_reply` and
    `describe_main`."""

    def __init__(self, script: Iterable[Step] = ()) -> None:
        self.steps: list[Step] = list(script)
        self.spent: list[bool] = [False] * len(self.steps)
        self.requests: list[Any] = []
        self._answered: dict[str, tuple[int, Blocks]] = {}
        self._lock = threading.Lock()
        server = _ModelServer(("127.0.0.1", 0), self.handler())
        super().__init__(server)
        self.url = f"http://127.0.0.1:{server.server_port}"

    # the wire (a subclass's)
    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def turn_of(self, body: dict[str, Any]) -> UserTurn:
        raise NotImplementedError

    def is_main(self, record: Any) -> bool:
        raise NotImplementedError

    def side_reply(self, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def render(self, reply: Reply) -> Blocks:
        raise NotImplementedError

    def digest(self, body: dict[str, Any]) -> str:
        raise NotImplementedError

    def unmatched_reply(self) -> Reply:
        raise NotImplementedError

    def describe_main(self, record: Any) -> str:
        raise NotImplementedError

    def add(self, *steps: Step) -> None:
        """Append steps while a session runs."""
        with self._lock:
            self.steps.extend(steps)
            self.spent.extend([False] * len(steps))

    # answering (called from the handler threads)
    def answer(self, record: Any) -> Blocks:
        """Choose the reply for a model request and note it on the record."""
        body = record.body if isinstance(record.body, dict) else {}
        record.turn = self.turn_of(body)
        if not self.is_main(record):
            record.kind = "side"
            record.reply = self.render(self.side_reply(body))
        else:
            record.kind = "main"
            record.step, record.reply = self._main_reply(body, record.turn)
            if record.step is not None:
                record.usage = dict(self.steps[record.step].reply.usage)
        with self._lock:
            self.requests.append(record)
        return record.reply

    def _main_reply(self, body: dict[str, Any], turn: UserTurn) -> tuple[int | None, Blocks]:
        key = self.digest(body)
        with self._lock:
            if key in self._answered:
                return self._answered[key]
            for index, step in enumerate(self.steps):
                if not self.spent[index] and step.match(turn):
                    self.spent[index] = True
                    self._answered[key] = (index, self.render(step.reply))
                    return self._answered[key]
        return None, self.render(self.unmatched_reply())

    def record_other(self, record: Any) -> None:
        with self._lock:
            self.requests.append(record)

    # what tests read
    def snapshot(self) -> list[Any]:
        with self._lock:
            return list(self.requests)

    def main_requests(self) -> list[Any]:
        return [r for r in self.snapshot() if r.kind == "main"]

    def side_requests(self) -> list[Any]:
        return [r for r in self.snapshot() if r.kind == "side"]

    @property
    def unmatched(self) -> list[Any]:
        return [r for r in self.main_requests() if r.step is None]

    def other_paths(self) -> list[str]:
        return sorted({f"{r.method} {r.path}" for r in self.snapshot() if r.kind == "other"})

    def user_texts(self) -> list[str]:
        """The text of every main request's last user turn, in arrival order."""
        return [r.turn.text for r in self.main_requests()]

    def pending(self) -> list[str]:
        with self._lock:
            return [s.name or f"step {i}" for i, s in enumerate(self.steps) if not self.spent[i]]

    def wait_for_request(self, predicate: Callable[[Any], bool], timeout: float = 90.0) -> Any:
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

    def wait_for_step(self, index: int, timeout: float = 90.0) -> Any:
        """The main request that spent step `index`."""
        return self.wait_for_request(lambda r: r.kind == "main" and r.step == index, timeout)

    def describe(self) -> str:
        """A readable account of every request: which step each spent, what it showed (the
        credential a request bore is never part of it)."""
        lines = [f"pending steps: {self.pending()}"]
        for r in self.snapshot():
            if r.kind == "main":
                label = "main, UNMATCHED" if r.step is None else f"main, step {r.step}"
                lines.append(f"  [{label}] {self.describe_main(r)}")
            else:
                shape = sorted(r.body) if isinstance(r.body, dict) else type(r.body).__name__
                lines.append(f"  [{r.kind}] {r.method} {r.path} {shape}")
        return "\n".join(lines)

    def assert_script_done(self) -> None:
        """Fail unless every step was spent and no main request went unmatched."""
        if self.pending() or self.unmatched:
            raise AssertionError(f"script not followed\n{self.describe()}")


class ScriptedHandler(BaseHTTPRequestHandler):
    """The HTTP side both fakes share: a request read into (body, headers, credential), an
    answer with a Content-Length on a keep-alive connection, and every method but POST
    recorded and answered 200 `{}`. A subclass sets `fake`, `record` and `do_POST`."""

    protocol_version = "HTTP/1.1"
    # The head and the body go out as two writes: with Nagle on, the body would wait for the
    # client's delayed ACK (40 ms on Linux), as no real API makes its answers wait.
    disable_nagle_algorithm = True
    fake: ScriptedModel
    credential_headers: tuple[str, ...] = ("x-api-key", "authorization")
    hidden_headers: frozenset[str] = frozenset({"authorization", "x-api-key", "cookie"})
    request_id_header = "request-id"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def read_request(self) -> tuple[Any, dict[str, str], str]:
        """The request's body (JSON, else its text), its headers without credentials, and
        the credential it bore."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k.lower(): v for k, v in self.headers.items()}
        credential = next((headers[h] for h in self.credential_headers if headers.get(h)), "")
        shown = {k: v for k, v in headers.items() if k not in self.hidden_headers}
        return body, shown, credential

    def record(self) -> Any:
        raise NotImplementedError

    def send_payload(self, status: int, payload: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header(self.request_id_header, "req_" + uuid.uuid4().hex[:20])
        self.end_headers()
        self.wfile.write(payload)

    def send_json(self, data: Any, status: int = 200) -> None:
        self.send_payload(status, json.dumps(data).encode(), "application/json")

    def do_GET(self) -> None:
        self.fake.record_other(self.record())
        self.send_json({})

    do_PUT = do_PATCH = do_DELETE = do_GET
