"""One session cannot take the model gateway's connections from the others: a pass holds at
most its share of connections (one more is refused 529 and closed), and connections that
never send a request head are hung up on, so the total cap frees up again. Meanwhile another
session's streamed answer comes through whole.

A real gateway on loopback in front of the scripted Messages API; the hoarding session's
connections are raw sockets."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator

import httpx
import pytest

from app.gateway.forwarding import Upstream
from app.gateway.relay import PER_PASS, ModelGateway
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything
from tests.support import wait_for

KEY = "sk-ant-api03-operator-limits-key"
HOARDER, OTHER = "github:o/r#1", "github:o/r#2"


def MODEL_SCRIPT() -> list[Step]:
    return [Step(anything, Reply("streamed through"))]


def _upstream(model: FakeAnthropic) -> Upstream:
    return Upstream(model.url, ((b"x-api-key", KEY.encode()),), "env")


def _ask(url: str, token: str) -> httpx.Response:
    body = {
        "model": "claude-opus-4",
        "stream": True,
        "max_tokens": 10,
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "hi"}],
    }
    return httpx.post(url + "/v1/messages", headers={"x-api-key": token}, json=body, timeout=30)


def _answered(socks: list[socket.socket], answers: dict[int, bytes]) -> int:
    waiting = [s for i, s in enumerate(socks) if i not in answers]
    readable, _, _ = select.select(waiting, [], [], 0.2) if waiting else ([], [], [])
    for sock in readable:
        answers[socks.index(sock)] = sock.recv(65536)
    return len(answers)


@pytest.fixture
def opened() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def test_one_pass_holds_at_most_its_share_of_connections(
    model: FakeAnthropic, opened: list[socket.socket]
) -> None:
    with ModelGateway(_upstream(model)) as gw:
        hoarder, other = gw.passes.mint(HOARDER), gw.passes.mint(OTHER)
        head = (
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {hoarder}\r\n"
            "content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
        )
        for _ in range(PER_PASS + 4):  # every one a request whose body never comes
            opened.append(socket.create_connection(("127.0.0.1", gw.port), timeout=30))
            opened[-1].sendall(head.encode())
        answers: dict[int, bytes] = {}
        assert wait_for(lambda: _answered(opened, answers) >= 4, timeout=30)
        for answer in answers.values():
            assert answer.startswith(b"HTTP/1.1 529 ") and b"connection: close" in answer
            assert b"too many connections to the model gateway" in answer
        # The other session's stream comes through whole meanwhile.
        streamed = _ask(gw.url, other)
        assert streamed.status_code == 200 and "streamed through" in streamed.text
        assert _answered(opened, answers) == 4  # the hoarder's share is still held
        assert gw.dropped == 4
        # Its connections closed, the hoarder is served again.
        for sock in opened:
            sock.close()
        assert wait_for(lambda: _ask(gw.url, hoarder).status_code == 200, timeout=30)


def test_connections_that_never_send_a_head_are_hung_up_on(
    model: FakeAnthropic, opened: list[socket.socket]
) -> None:
    with ModelGateway(_upstream(model), max_connections=32, head_wait=1.0) as gw:
        other = gw.passes.mint(OTHER)
        for _ in range(32):  # every slot the gateway has, silent
            opened.append(socket.create_connection(("127.0.0.1", gw.port), timeout=30))

        def served() -> bool:
            try:
                return _ask(gw.url, other).status_code == 200
            except httpx.TransportError:  # closed at once: every slot is taken
                return False

        assert wait_for(served, timeout=60)
        for sock in opened:
            assert sock.recv(1) == b""  # hung up on, never answered
        assert gw.dropped >= 32
