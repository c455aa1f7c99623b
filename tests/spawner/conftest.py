"""Fixtures of the spawner's tests: contexts made by a test and ended at its teardown, and
the App as a stop gate sees it (counting the attempts it is asked to count)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from app.spawner.context import SpawnerContext


@pytest.fixture
def stopped() -> Iterator[list[SpawnerContext]]:
    """Contexts whose tmux servers are ended at teardown."""
    made: list[SpawnerContext] = []
    yield made
    for ctx in made:
        ctx.runner.kill_server()
        if ctx.limiter is not None:
            ctx.limiter.release()
        if ctx.models is not None:
            ctx.models.close()


class _App(BaseHTTPRequestHandler):
    """The App as the stop gate sees it: counts each attempt it is asked to count."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        hits: list[str] = self.server.hits  # type: ignore[attr-defined]
        hits.append(self.path)
        body = json.dumps({"attempt": len(hits)}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def gate_counting_app() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _App)
    server.hits = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
