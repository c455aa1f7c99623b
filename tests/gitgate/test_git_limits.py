"""One session cannot take the App's threads through the git gateway: its git requests in
flight are capped per session token (past the cap, 503 in git's text/plain) while
`/healthz` and the spawners' API go on answering, and a git body that goes quiet is cut.

Real App as `the-loop serve` deploys it (gunicorn's asgi worker) and as plain WSGI under
gunicorn's stock threaded worker (fewer threads than the requests opened): the caps are the
App's own, whatever front serves it. Real database, git server and tmux; the trickling
requests are raw sockets on loopback.
"""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from app.ingress.sampling import PER_MINUTE
from tests.pull_support import REPO
from tests.support import wait_for

IDLE_SECONDS = 3
# More than the App's request threads: 32 under `the-loop serve`, GUNICORN_THREADS under
# plain gunicorn, whose arbiter lingers on each connection it closes while its client
# still sends (so fewer there).
TRICKLERS = {"asgi": 40, "gunicorn": 20}


def _status(answer: bytes) -> int:
    return int(answer.split(b"\r\n", 1)[0].split()[1])


def _answer(sock: socket.socket) -> bytes:
    """One whole answer: its head, then its body as long as Content-Length says (a server
    may send them in separate segments), or what came before the server closed."""
    data = sock.recv(65536)
    while b"\r\n\r\n" not in data and (more := sock.recv(65536)):
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length and (more := sock.recv(65536)):
        body += more
    return head + b"\r\n\r\n" + body


class Tricklers:
    """Chunked `POST git-upload-pack` requests that send a byte at a time while `alive`."""

    def __init__(self, port: int, token: str, count: int) -> None:
        basic = base64.b64encode(f"x:{token}".encode()).decode()
        head = (
            f"POST /git/{REPO}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Basic {basic}\r\n"
            "Content-Type: application/x-git-upload-pack-request\r\n"
            "Transfer-Encoding: chunked\r\n\r\n1\r\n0\r\n"
        )
        self.socks = [
            socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)
        ]
        for sock in self.socks:
            sock.sendall(head.encode())
        self.answers: dict[int, bytes] = {}
        self.alive = threading.Event()
        self.alive.set()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        while self.alive.is_set():
            for sock in self.socks:
                with contextlib.suppress(OSError):
                    sock.sendall(b"1\r\n0\r\n")
            time.sleep(0.5)

    def collect(self) -> int:
        """Read what answers came (without blocking); how many answered so far."""
        waiting = [s for i, s in enumerate(self.socks) if i not in self.answers]
        readable, _, _ = select.select(waiting, [], [], 0.2) if waiting else ([], [], [])
        for sock in readable:
            self.answers[self.socks.index(sock)] = _answer(sock)
        return len(self.answers)

    def close(self) -> None:
        self.alive.clear()
        self.thread.join(timeout=10)
        for sock in self.socks:
            sock.close()


@pytest.fixture
def tricklers(live, request: pytest.FixtureRequest) -> Iterator[Tricklers]:
    port = int(live.bed.app.url.rsplit(":", 1)[1])
    count = TRICKLERS[request.node.callspec.params["pull_app"]]
    opened = Tricklers(port, live.env["THE_LOOP_SESSION_TOKEN"], count)
    try:
        yield opened
    finally:
        opened.close()


@pytest.mark.app_env(THE_LOOP_GIT_IDLE_SECONDS=str(IDLE_SECONDS))
@pytest.mark.parametrize("pull_app", ["asgi", "gunicorn"], indirect=True)
def test_a_session_trickling_git_bodies_starves_nobody(live, tricklers: Tricklers):
    bed = live.bed
    opened = len(tricklers.socks)
    # All but the session's share are refused at once, in words git shows its user.
    assert wait_for(lambda: tricklers.collect() >= opened - 2, timeout=120)
    busy = list(tricklers.answers.values())
    assert {_status(a) for a in busy} == {503}
    assert all(b"text/plain" in a and b"the-loop: too many git requests" in a for a in busy)
    # Counted, with a sampled few stored: the refusals cost no row each.
    rejected = [r for r in bed.events("request.rejected") if r["reason"] == "git-busy"]
    assert rejected and all(r["cap"] == "holder" for r in rejected)
    assert len(rejected) <= 2 * PER_MINUTE < opened - 2
    # Meanwhile (two bodies still trickle in) the App answers everyone else.
    assert httpx.get(f"{bed.app.url}/healthz", timeout=120).status_code == 200
    assert live.spawner.poll().status_code in (200, 204)
    assert tricklers.collect() == opened - 2  # the session's two are still being read

    # Once they go quiet they are cut, and the session's git works again.
    tricklers.alive.clear()
    assert wait_for(lambda: tricklers.collect() == opened, timeout=120)
    cut = [a for a in tricklers.answers.values() if _status(a) != 503]
    assert [_status(a) for a in cut] == [408, 408]
    assert all(b"no byte of the body came" in a for a in cut)
    fetched = httpx.get(
        f"{bed.app.url}/git/{REPO}.git/info/refs",
        params={"service": "git-upload-pack"},
        auth=("x", live.env["THE_LOOP_SESSION_TOKEN"]),
        timeout=30,
    )
    assert fetched.status_code == 200 and b"refs/heads/main" in fetched.content
