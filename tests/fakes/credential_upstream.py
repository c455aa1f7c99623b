"""A stand-in for a credentialed service behind a credential route: it answers only requests
that carry the expected `Authorization`, records every one it saw, and, on purpose, does what
would hand a careless proxy's client the credential: it challenges (401 with
`WWW-Authenticate`), sets a cookie, echoes the request's headers in a body, and redirects
both to itself and to another host."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.server import ServedInThread

BIG = 8 * 1024 * 1024  # `GET /simple/big`'s size


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, **headers: str) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _answer(self) -> None:
        body = self._body()
        seen = self.headers.get("Authorization", "")
        with self.server.lock:
            self.server.seen.append((self.command, self.path, seen))
        if seen != self.server.expected or self.path.startswith("/simple/challenge"):
            self._send(
                401,
                b"who are you?",
                WWW_Authenticate='Basic realm="staging"',
                Set_Cookie="sid=" + seen.replace(" ", "_"),
            )
            return
        if self.path.startswith("/simple/echo"):
            echoed = json.dumps(dict(self.headers.items())).encode()
            self._send(200, echoed, Content_Type="application/json")
        elif self.path.startswith("/simple/here"):
            location = f"http://127.0.0.1:{self.server.server_port}/simple/ok?from=here"
            self._send(302, b"", Location=location)
        elif self.path.startswith("/simple/away"):
            self._send(302, b"", Location="http://elsewhere.example/x?from=away")
        elif self.path.startswith("/simple/big"):
            self._send(200, b"x" * BIG, Content_Type="application/octet-stream")
        else:
            digest = hashlib.sha256(body).hexdigest()
            self._send(200, f"ok {self.command} {self.path} {len(body)} {digest}".encode())

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, expected: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.expected = expected
        self.seen: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()


class CredentialUpstream(ServedInThread):
    """`expected` is the `Authorization` it wants; `seen` what each request brought."""

    def __init__(self, expected: str) -> None:
        self.server = _Server(expected)
        super().__init__(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    @property
    def seen(self) -> list[tuple[str, str, str]]:
        with self.server.lock:
            return list(self.server.seen)
