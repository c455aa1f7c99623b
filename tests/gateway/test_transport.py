"""The gateway's upstream client (`app.gateway.transport`) against real servers on 127.0.0.1:
plain HTTP kept alive, TLS with a certificate made here, a server that closes its idle
connection, answers cut short, and the errors the relay maps to a 502."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.gateway.forwarding import Upstream
from app.gateway.relay import ModelGateway
from app.gateway.transport import (
    ConnectError,
    PoolTimeout,
    RemoteProtocolError,
    Timeouts,
    UpstreamPool,
)
from tests.support import free_port, self_signed


class _Hello(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body) + (self.path == "/short")))
        if self.path in ("/close", "/short"):
            self.close_connection = True  # after the answer, without saying so
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def plain() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[str, ssl.SSLContext]]:
    cert, key = self_signed(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain(cert, key)
    server.socket = serving.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    trusting = ssl.create_default_context(cafile=str(cert))
    yield f"https://localhost:{server.server_port}", trusting
    server.shutdown()
    server.server_close()


async def _get(pool: UpstreamPool, url: str) -> tuple[int, bytes]:
    upstream = Upstream(url.rsplit("/", 1)[0])
    target = upstream.target(b"/" + url.rsplit("/", 1)[1].encode())
    host = [(b"host", upstream.origin[2])]
    answer = await pool.request(upstream.origin[0], b"GET", target, host, b"")
    try:
        return answer.status, b"".join([chunk async for chunk in answer.chunks()])
    finally:
        await answer.aclose()


def _pool(**options: Any) -> UpstreamPool:
    return UpstreamPool(timeouts=Timeouts(read=10), **options)


def test_plain_requests_share_one_kept_alive_connection(plain: str) -> None:
    async def run() -> list[tuple[int, bytes]]:
        async with _pool() as pool:
            got = [await _get(pool, f"{plain}/{n}") for n in range(3)]
            assert pool.opened == 1 and pool.idle == 1  # kept alive and reused
            return got

    got = asyncio.run(run())
    assert [status for status, _ in got] == [200, 200, 200]
    assert got[2][1] == b"hello /2"


def test_tls_is_negotiated_and_the_certificate_checked(tls: tuple[str, ssl.SSLContext]) -> None:
    url, trusting = tls

    async def run() -> tuple[int, bytes]:
        async with _pool(ssl_context=trusting) as pool:
            return await _get(pool, f"{url}/secure")

    status, body = asyncio.run(run())
    assert status == 200 and body.startswith(b"hello /secure")

    async def untrusted() -> None:
        async with _pool() as pool:  # certifi's roots do not know this certificate
            await _get(pool, f"{url}/secure")

    with pytest.raises(ConnectError):
        asyncio.run(untrusted())


def test_a_connection_its_server_closed_is_not_reused(plain: str) -> None:
    async def run() -> tuple[list[int], int]:
        async with _pool() as pool:
            first = await _get(pool, f"{plain}/close")
            await asyncio.sleep(0.2)  # the server's FIN arrives
            second = await _get(pool, f"{plain}/after")
            return [first[0], second[0]], pool.opened

    assert asyncio.run(run()) == ([200, 200], 2)


def test_an_answer_cut_short_is_an_error_and_its_connection_dropped(plain: str) -> None:
    async def run() -> int:
        async with _pool() as pool:
            with pytest.raises(RemoteProtocolError):
                await _get(pool, f"{plain}/short")  # one byte fewer than it announced
            return pool.idle

    assert asyncio.run(run()) == 0


def test_a_request_past_the_connections_in_use_waits_for_one_then_gives_up(plain: str) -> None:
    async def run() -> tuple[int, bytes]:
        async with UpstreamPool(max_connections=1, timeouts=Timeouts(read=10, pool=0.2)) as pool:
            upstream = Upstream(plain)
            held = await pool.request(
                upstream.origin[0], b"GET", b"/held", [(b"host", upstream.origin[2])], b""
            )
            with pytest.raises(PoolTimeout):  # the one connection is still in use
                await _get(pool, f"{plain}/waiting")
            await held.aclose()
            return await _get(pool, f"{plain}/after")

    assert asyncio.run(run()) == (200, b"hello /after")


def test_nothing_listening_is_a_connect_error() -> None:
    async def run() -> None:
        async with _pool() as pool:
            await _get(pool, f"http://127.0.0.1:{free_port()}/")

    with pytest.raises(ConnectError):
        asyncio.run(run())


def _breaking_upstream(server: socket.socket) -> None:
    """Answers each request with a head that announces 1000 bytes, sends 10, and hangs up."""
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"content-length: 1000\r\n\r\nevent: mes"
            )


def test_an_upstream_that_breaks_off_an_answer_closes_the_session_s_connection() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_breaking_upstream, args=(server,), daemon=True).start()
    up = Upstream(f"http://127.0.0.1:{server.getsockname()[1]}", ((b"x-api-key", b"k"),), "env")
    try:
        with ModelGateway(up) as gateway:
            token = gateway.passes.mint("github:o/r#1")
            for _ in range(2):  # the gateway goes on serving after one
                with pytest.raises(httpx.RemoteProtocolError):  # the answer ends short
                    httpx.post(
                        gateway.url + "/v1/messages",
                        headers={"x-api-key": token},
                        json={"model": "m", "messages": []},
                        timeout=30,
                    )
    finally:
        server.close()


def _scripted_upstream(server: socket.socket, answers: list[bytes]) -> None:
    """Answers the requests of one connection in turn with `answers`' bytes, each sent in
    two writes split inside it; hangs up after the last."""
    conn, _ = server.accept()
    with conn:
        for answer in answers:
            received = b""
            while b"\r\n\r\n" not in received:
                received += conn.recv(65536)
            half = len(answer) // 2
            conn.sendall(answer[:half])
            time.sleep(0.02)
            conn.sendall(answer[half:])


def _scripted(answers: list[bytes]) -> tuple[str, socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    threading.Thread(target=_scripted_upstream, args=(server, answers), daemon=True).start()
    return f"http://127.0.0.1:{server.getsockname()[1]}", server


def test_chunked_answers_a_trailer_and_a_continue_are_read_on_one_connection() -> None:
    url, server = _scripted(
        [
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext",
            b"HTTP/1.1 200 OK\r\n\r\nuntil the end",  # neither length nor chunks
        ]
    )

    async def run() -> tuple[list[tuple[int, bytes]], int]:
        async with _pool() as pool:
            got = [await _get(pool, f"{url}/{n}") for n in range(3)]
            return got, pool.opened

    try:
        got, opened = asyncio.run(run())
    finally:
        server.close()
    assert got == [(200, b"hello, world"), (200, b"next"), (200, b"until the end")]
    assert opened == 1


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
        b"HTTP/1.1 200 OK\r\nX-Split: a\nX-Injected: b\r\nContent-Length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
        b"not http at all\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n",  # hangs up inside the head
    ],
)
def test_an_answer_http_does_not_allow_is_a_protocol_error(answer: bytes) -> None:
    url, server = _scripted([answer])

    async def run() -> int:
        async with _pool() as pool:
            with pytest.raises(RemoteProtocolError):
                await _get(pool, f"{url}/")
            return pool.idle

    try:
        assert asyncio.run(run()) == 0
    finally:
        server.close()
