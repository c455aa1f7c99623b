"""A git smart-HTTP server on loopback (git's own `http-backend` behind WSGI) that demands
GitHub-style basic auth (`x-access-token:<token>`), and records the process table at each
request, while the cloning git is alive, so a test can check what `ps` showed.

It checks either one fixed token, or asks `accept(token, repository, push)` — so a test can
accept exactly the tokens the fake GitHub minted for that repository, with `contents: write`
for a push."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

CGI_VARS = ("REQUEST_METHOD", "QUERY_STRING", "CONTENT_TYPE", "PATH_INFO", "REMOTE_ADDR")


Accept = Callable[[str, str, bool], bool]


def _basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


class GitHttp:
    def __init__(self, root: Path, token: str = "", accept: Accept | None = None) -> None:
        self.root = root
        self.expected = _basic(token)
        self.accept = accept
        self.process_tables: list[str] = []
        self.authorized = 0
        self.refused = 0
        self.pushes = 0

    def _allowed(self, environ: dict[str, Any]) -> bool:
        header = str(environ.get("HTTP_AUTHORIZATION") or "")
        if self.accept is None:
            return header == self.expected
        try:
            user, _, token = base64.b64decode(header.removeprefix("Basic ")).decode().partition(":")
        except ValueError:
            return False
        path = str(environ.get("PATH_INFO") or "")
        repository = path.strip("/").split(".git", 1)[0]
        push = "git-receive-pack" in path + str(environ.get("QUERY_STRING") or "")
        return user == "x-access-token" and self.accept(token, repository, push)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        self.process_tables.append(
            subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        )
        if not self._allowed(environ):
            self.refused += 1
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"')])
            return [b"authentication required\n"]
        self.authorized += 1
        if str(environ.get("PATH_INFO") or "").endswith("/git-receive-pack"):
            self.pushes += 1
        env = {k: str(environ.get(k, "")) for k in CGI_VARS}
        env.update(
            GIT_PROJECT_ROOT=str(self.root),
            GIT_HTTP_EXPORT_ALL="1",
            REMOTE_USER="x-access-token",
            CONTENT_LENGTH=str(environ.get("CONTENT_LENGTH") or ""),
            HTTP_CONTENT_ENCODING=str(environ.get("HTTP_CONTENT_ENCODING", "")),
            GIT_PROTOCOL=str(environ.get("HTTP_GIT_PROTOCOL", "")),
            PATH="/usr/bin:/bin",
        )
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            body = environ["wsgi.input"].read(length)
        elif environ.get("wsgi.input_terminated"):  # a chunked body, decoded by the server
            body = environ["wsgi.input"].read()
        else:
            body = b""
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True)
        head, _, payload = out.stdout.partition(b"\r\n\r\n")
        status, headers = "200 OK", []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [payload]
