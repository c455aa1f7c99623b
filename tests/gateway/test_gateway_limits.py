"""One session cannot take the model gateway's connections from the others: a pass holds at
most its share of connections (one more is refused 529 and closed), and connections that
never send a request head are hung up on, so the total cap frees up again. Meanwhile another
session's streamed answer comes through whole. A connection serves one request after another
as HTTP/1.1 allows, and is closed after one that asks for it or speaks HTTP/1.0. The per-session cap and the head's wait
are the operator's settings (`routing.sandbox.gateway`), which the spawner's gateway obeys.

A real gateway on loopback in front of the scripted Messages API; the hoarding session's
connections are raw sockets."""

from __future__ import annotations

import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config.operator_config import ConfigError, load_config, parse_config
from app.gateway.access import open_model_access
from app.gateway.forwarding import Upstream
from app.gateway.relay import HEAD_WAIT, PER_PASS, ModelGateway
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything
from tests.support import wait_for

KEY = "sk-ant-api03-operator-limits-key"
HOARDER, OTHER = "github:o/r#1", "github:o/r#2"


def MODEL_SCRIPT() -> list[Step]:
    return [Step(anything, Reply("streamed through"))]


def _upstream(model: FakeAnthropic) -> Upstream:
    return Upstream(model.url, ((b"x-api-key", KEY.encode()),), "env")


BODY = {
    "model": "claude-opus-4",
    "stream": True,
    "max_tokens": 10,
    "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
    "messages": [{"role": "user", "content": "hi"}],
}


def _ask(url: str, token: str) -> httpx.Response:
    return httpx.post(url + "/v1/messages", headers={"x-api-key": token}, json=BODY, timeout=30)


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


def _raw_request(token: str, version: str = "1.1", extra: str = "") -> bytes:
    body = json.dumps(BODY).encode()
    head = (
        f"POST /v1/messages HTTP/{version}\r\nHost: x\r\nx-api-key: {token}\r\n{extra}"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _until_closed(sock: socket.socket) -> bytes:
    received = b""
    while chunk := sock.recv(65536):  # a connection the gateway keeps open times out here
        received += chunk
    return received


def test_a_connection_serves_request_after_request_until_one_may_not_be_followed(
    model: FakeAnthropic, opened: list[socket.socket]
) -> None:
    with ModelGateway(_upstream(model)) as gw:
        token = gw.passes.mint(OTHER)
        kept = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        opened.append(kept)
        # Both in one write: the second waits, read, behind the first.
        kept.sendall(_raw_request(token) + _raw_request(token, extra="Connection: close\r\n"))
        answers = _until_closed(kept).split(b"HTTP/1.1 ")[1:]
        assert [a.startswith(b"200 OK\r\n") for a in answers] == [True, True]
        assert all(b"streamed through" in a for a in answers)
        assert b"connection: close" not in answers[0] and b"connection: close" in answers[1]
        old = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        opened.append(old)
        old.sendall(_raw_request(token, version="1.0"))  # HTTP/1.0: one request a connection
        answer = _until_closed(old)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"streamed through" in answer
        assert b"connection: close" in answer


def _hung_up(sock: socket.socket) -> bool:
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:  # closed with the rest of what was sent unread
        return True


def test_a_chunked_request_is_read_whole_and_one_http_does_not_allow_is_hung_up_on(
    model: FakeAnthropic, opened: list[socket.socket]
) -> None:
    with ModelGateway(_upstream(model)) as gw:
        token = gw.passes.mint(OTHER)
        body = json.dumps(BODY).encode()
        chunked = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        opened.append(chunked)
        head = (
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        pieces = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in (body[:10], body[10:]))
        chunked.sendall(head.encode() + pieces + b"0\r\nX-Trailer: t\r\n\r\n")
        answer = _until_closed(chunked)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b"streamed through" in answer
        assert model.main_requests()[-1].body == BODY
        for bad in (
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n"
            "Bad Name: y\r\ncontent-length: 2\r\n\r\n{}",
            f"POST /v1/messages HTTP/1.1\r\nx-api-key: {token}\r\ncontent-length: 2\r\n\r\n{{}}",
            "\x16\x03\x01\x02\x00",  # TLS to a plain port: hung up on at once
            "POST /v1/messages HTTP/1.1\r\nX-Long: " + "x" * 70_000,
        ):
            sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
            opened.append(sock)
            sock.sendall(bad.encode("latin-1"))
            assert _hung_up(sock)
        assert len(model.main_requests()) == 1


# -- the operator's settings ---------------------------------------------------------------


def test_the_operator_s_lower_connection_cap_holds_in_the_spawner_s_gateway(
    model: FakeAnthropic, opened: list[socket.socket], tmp_path: Path
) -> None:
    """`routing.sandbox.gateway` in cli-config.yaml (2 connections, a head within 1 s): the
    gateway the spawner opens refuses a session's third connection, and only that one, and
    hangs up on a connection that stays silent (the default would wait 30 s)."""
    path = tmp_path / "cli-config.yaml"
    settings = "connectionsPerSession: 2\n      headTimeoutSeconds: 1"
    path.write_text(f"routing:\n  sandbox:\n    gateway:\n      {settings}\n")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": model.url}
    access = open_model_access(load_config(path), env, lambda *a, **k: None)
    assert access is not None
    try:
        hoarder, other = access.for_session(HOARDER).key, access.for_session(OTHER).key
        head = (
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {hoarder}\r\n"
            "content-type: application/json\r\ncontent-length: 1000\r\n\r\n{"
        )
        port = access.gateway.port
        for _ in range(5):  # every one a request whose body never comes
            opened.append(socket.create_connection(("127.0.0.1", port), timeout=30))
            opened[-1].sendall(head.encode())
        answers: dict[int, bytes] = {}
        assert wait_for(lambda: _answered(opened, answers) >= 3, timeout=30)
        assert all(a.startswith(b"HTTP/1.1 529 ") for a in answers.values())
        streamed = _ask(access.gateway.url, other)
        assert streamed.status_code == 200 and "streamed through" in streamed.text
        assert _answered(opened, answers) == 3  # the hoarder's two are still held
        silent = socket.create_connection(("127.0.0.1", port), timeout=20)
        opened.append(silent)
        assert silent.recv(1) == b""  # hung up on, well before the default's 30 s
    finally:
        access.gateway.stop()


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("connectionsPerSession", "0"),
        ("connectionsPerSession", "many"),
        ("headTimeoutSeconds", "-1"),
    ],
)
def test_a_bad_gateway_setting_names_its_key_and_file(
    tmp_path: Path, setting: str, value: str
) -> None:
    path = tmp_path / "cli-config.yaml"
    path.write_text(f"routing:\n  sandbox:\n    gateway:\n      {setting}: {value}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(path) in str(raised.value)
    assert f"routing.sandbox.gateway.{setting}" in str(raised.value)


def test_the_gateway_s_defaults_are_unchanged_without_settings() -> None:
    caps = parse_config({}, "cfg.yaml").routing.sandbox.gateway
    assert (caps.connections_per_session, caps.head_timeout_seconds) == (PER_PASS, HEAD_WAIT)
    assert (PER_PASS, HEAD_WAIT) == (16, 30.0)
