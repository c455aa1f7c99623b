"""A session's request body through a real gateway on loopback in front of the scripted
Messages and Responses APIs: one larger than `routing.sandbox.gateway.maxRequestBytes` is
refused 413 in its API's own error shape before the gateway reads it (by its announced length,
or as soon as its chunks pass the size), and a body that gives a key twice is refused 403
whichever copy would have passed — nothing of either reaches the model."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.config.operator_config import load_config
from app.gateway.access import open_model_access
from app.gateway.forwarding import Upstream
from app.gateway.judging import IN_THREAD
from app.gateway.relay import ModelGateway
from tests.fakes.anthropic import FakeAnthropic, Reply, Step, anything
from tests.fakes.responses_api import FakeResponses

KEY = "sk-ant-api03-operator-bodies-key"
ITEM = "github:o/r#3"
MODEL_SCRIPT = [Step(anything, Reply("fine"))]
LIMIT = 1024 * 1024


def _gateway(model: FakeAnthropic, **options: object) -> ModelGateway:
    return ModelGateway(Upstream(model.url, ((b"x-api-key", KEY.encode()),), "env"), **options)  # type: ignore[arg-type]


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def _answer(sock: socket.socket) -> tuple[bytes, dict]:
    """The whole answer the gateway wrote before closing: its head and its JSON body."""
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except ConnectionResetError:  # closed with what the client sent past the head unread
        pass
    head, _, body = received.partition(b"\r\n\r\n")
    return head, json.loads(body)


def test_a_body_announced_larger_than_the_limit_is_refused_413_unread(
    model: FakeAnthropic, sockets: list[socket.socket]
) -> None:
    with _gateway(model, max_request_bytes=LIMIT) as gw:
        token = gw.passes.mint(ITEM)
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        sockets.append(sock)
        # Only the head goes: the answer comes without waiting for a byte of the body.
        sock.sendall(
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n"
            f"content-type: application/json\r\ncontent-length: {60 * LIMIT}\r\n\r\n".encode()
        )
        head, error = _answer(sock)
        assert head.startswith(b"HTTP/1.1 413 ") and b"connection: close" in head
        assert error["type"] == "error" and error["error"]["type"] == "request_too_large"
        assert "routing.sandbox.gateway.maxRequestBytes" in error["error"]["message"]
        assert str(LIMIT) in error["error"]["message"]
        # A body within the limit still goes on.
        fine = httpx.post(
            gw.url + "/v1/messages",
            headers={"x-api-key": token},
            json={"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "a"}]},
            timeout=30,
        )
        assert fine.status_code == 200 and len(model.snapshot()) == 1


def test_a_chunked_body_is_refused_once_it_passes_the_limit(
    model: FakeAnthropic, sockets: list[socket.socket]
) -> None:
    with _gateway(model, max_request_bytes=LIMIT) as gw:
        token = gw.passes.mint(ITEM)
        sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
        sockets.append(sock)
        sock.sendall(
            f"POST /v1/messages HTTP/1.1\r\nHost: x\r\nx-api-key: {token}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        piece = b"{" + b" " * (256 * 1024)
        chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
        for _ in range(5):  # past the limit; the body never ends
            sock.sendall(chunk)
        head, error = _answer(sock)
        assert head.startswith(b"HTTP/1.1 413 ")
        assert error["error"]["type"] == "request_too_large"
        assert model.snapshot() == []


def test_a_too_large_responses_body_is_refused_in_openai_s_shape(
    sockets: list[socket.socket],
) -> None:
    with FakeResponses([Step(anything, Reply("ok"))]) as model:
        openai = Upstream(model.base_url, ((b"authorization", b"Bearer sk-proj-canary"),))
        upstream = Upstream("http://127.0.0.1:9")
        with ModelGateway(upstream, responses=openai, max_request_bytes=LIMIT) as gw:
            token = gw.passes.mint(ITEM)
            sock = socket.create_connection(("127.0.0.1", gw.port), timeout=30)
            sockets.append(sock)
            sock.sendall(
                f"POST /v1/responses HTTP/1.1\r\nHost: x\r\nauthorization: Bearer {token}\r\n"
                f"content-length: {LIMIT + 1}\r\n\r\n".encode()
            )
            head, error = _answer(sock)
        assert head.startswith(b"HTTP/1.1 413 ")
        assert error["error"]["code"] == "request_too_large" and model.snapshot() == []


def test_a_key_given_twice_is_refused_whichever_copy_would_pass(model: FakeAnthropic) -> None:
    with _gateway(model) as gw:
        token = gw.passes.mint(ITEM)
        fetch = '{"type": "web_fetch_20250910", "name": "web_fetch"}'
        message = '"messages": [{"role": "user", "content": "hi"}]'
        twice = [
            f'{{"model": "m", "max_tokens": 5, "tools": [{fetch}], "tools": [], {message}}}',
            f'{{"model": "m", "max_tokens": 5, "tools": [], {message}, "tools": [{fetch}]}}',
        ]
        with httpx.Client(timeout=30) as client:
            answers = [
                client.post(
                    gw.url + "/v1/messages", headers={"x-api-key": token}, content=body.encode()
                )
                for body in twice
            ]
            assert model.snapshot() == []  # neither reached the model
            once = f'{{"model": "m", "max_tokens": 5, "tools": [], {message}}}'
            fine = client.post(
                gw.url + "/v1/messages", headers={"x-api-key": token}, content=once.encode()
            )
    for answer in answers:
        assert answer.status_code == 403
        assert answer.json()["error"]["type"] == "permission_error"
        assert "'tools' twice" in answer.json()["error"]["message"]
    assert fine.status_code == 200 and len(model.snapshot()) == 1
    assert gw.reach_refused == {ITEM: 2}


def test_a_large_body_is_judged_beside_the_gateway_as_a_small_one_is(model: FakeAnthropic) -> None:
    """Past `IN_THREAD` bytes a body is judged in a process of the gateway's: the same rules."""
    text = "y" * (IN_THREAD + 1024)
    fetch = '{"type": "web_fetch_20250910", "name": "web_fetch"}'
    message = f'"messages": [{{"role": "user", "content": "{text}"}}]'
    twice = f'{{"model": "m", "max_tokens": 5, "tools": [{fetch}], {message}, "tools": []}}'
    once = f'{{"model": "m", "max_tokens": 5, "tools": [], {message}}}'
    with _gateway(model) as gw, httpx.Client(timeout=60) as client:
        token = gw.passes.mint(ITEM)
        url, headers = gw.url + "/v1/messages", {"x-api-key": token}
        refused = client.post(url, headers=headers, content=twice.encode())
        assert refused.status_code == 403 and "'tools' twice" in refused.text
        assert model.snapshot() == []
        assert client.post(url, headers=headers, content=once.encode()).status_code == 200
    assert model.snapshot()[0].body["messages"][0]["content"] == text


def test_the_operator_s_request_size_reaches_the_spawner_s_gateway(
    model: FakeAnthropic, tmp_path: Path
) -> None:
    path = tmp_path / "cli-config.yaml"
    path.write_text("routing:\n  sandbox:\n    gateway:\n      maxRequestBytes: 2MiB\n")
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": model.url}
    access = open_model_access(load_config(path), env, lambda *a, **k: None)
    assert access is not None
    try:
        token = access.for_session(ITEM).key
        text = "x" * (3 * 1024 * 1024)
        big = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": text}]}
        answer = httpx.post(
            access.gateway.url + "/v1/messages", headers={"x-api-key": token}, json=big, timeout=30
        )
        assert answer.status_code == 413 and "2097152" in answer.json()["error"]["message"]
        assert model.snapshot() == []
    finally:
        access.gateway.stop()
