"""Git requests that trickle: raw chunked `POST git-upload-pack` sockets on loopback that
send a byte of body at a time, and what the App answered each (the git caps' tests)."""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import threading
import time


def status_of(answer: bytes) -> int:
    return int(answer.split(b"\r\n", 1)[0].split()[1])


def whole_answer(sock: socket.socket) -> bytes:
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
    """`count` chunked `POST git-upload-pack` requests for `repo` with `token` as git's
    password, that send a byte at a time while `alive` (and never close on their own)."""

    def __init__(self, port: int, token: str, count: int, repo: str) -> None:
        basic = base64.b64encode(f"x:{token}".encode()).decode()
        head = (
            f"POST /git/{repo}.git/git-upload-pack HTTP/1.1\r\nHost: x\r\n"
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
            self.answers[self.socks.index(sock)] = whole_answer(sock)
        return len(self.answers)

    def close(self) -> None:
        self.alive.clear()
        self.thread.join(timeout=10)
        for sock in self.socks:
            sock.close()
