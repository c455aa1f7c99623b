"""The host's side of a closed network without a sandbox: real unix sockets served by
`SessionNetworks`, real TCP servers behind them. A route relays bytes both ways; the proxy
lets a listed host through and refuses the rest with a 403 and an event, folding a flood of
refusals into a count; a directory deeper than a socket address allows still works; ending
the session removes its sockets; one session holds at most its share of a route's
connections, without touching another session's; a far end that is down closes the
connection and leaves a line in the spawner's log; a registry the devbox's own configuration
names is reached wherever it lies, the same name written in `egress` is not."""

from __future__ import annotations

import os
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config.operator_config import parse_config
from app.spawner.network.netgates import (
    REFUSALS_PER_MINUTE,
    ROUTE_CONNECTIONS,
    SessionNetworks,
    session_dir,
)
from app.spawner.network.netplan import NetPlan, Route
from app.spawner.network.registries import read_registries
from app.spawner.steps.netlaunch import egress_plan
from tests.spawner_support import talk_unix
from tests.support import free_port

ITEM = "github:o/r#1"


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        self.wfile.write(b"echo: " + self.rfile.readline())


@pytest.fixture
def echo() -> Iterator[int]:
    server = _Listener(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_routes_relay_the_proxy_allows_and_refuses_and_the_end_cleans_up(
    tmp_path: Path, echo: int
) -> None:
    emitted: list[tuple[str, str, dict[str, Any]]] = []
    root = tmp_path / ("deep-" * 12) / "net"  # past a socket address's length
    nets = SessionNetworks(root, lambda event, item, **f: emitted.append((event, item, f)))
    plan = NetPlan(
        (Route("echo.sock", 9999, "127.0.0.1", echo),),
        3128,
        frozenset({("127.0.0.1", echo)}),
        "http://127.0.0.1:9",
    )
    try:
        directory = nets.open(ITEM, plan)
        assert directory == session_dir(root, ITEM) and len(str(directory / "proxy.sock")) > 108
        assert talk_unix(directory / "echo.sock", b"hello\n") == b"echo: hello\n"
        tunnel = f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\nthrough\n".encode()
        assert talk_unix(directory / "proxy.sock", tunnel) == (
            b"HTTP/1.1 200 Connection established\r\n\r\necho: through\n"
        )
        refused = talk_unix(directory / "proxy.sock", b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        assert (
            refused.startswith(b"HTTP/1.1 403 Forbidden") and b"routing.sandbox.egress" in refused
        )
        assert emitted == [
            (
                "session.egress_refused",
                ITEM,
                {
                    "level": "warning",
                    "host": "example.com",
                    "port": 443,
                    "method": "CONNECT",
                    "target": "example.com:443",
                    "reason": "not in routing.sandbox.egress",
                    "folded": 0,
                    "harness_own": False,
                },
            )
        ]
        for _ in range(REFUSALS_PER_MINUTE + 5):  # a flood: events stop, a count goes on
            talk_unix(directory / "proxy.sock", b"GET http://x.test/ HTTP/1.1\r\n\r\n")
        assert len(emitted) == REFUSALS_PER_MINUTE
        bad = talk_unix(directory / "proxy.sock", b"GET /no-host HTTP/1.1\r\n\r\n")
        assert bad.startswith(b"HTTP/1.1 400 Bad Request")
        nets.close(ITEM)
        assert not directory.exists()
    finally:
        nets.stop()


def test_a_listed_name_that_resolves_to_loopback_is_refused_and_an_event_says_why(
    tmp_path: Path, echo: int
) -> None:
    emitted: list[tuple[str, str, dict[str, Any]]] = []
    nets = SessionNetworks(
        tmp_path / "net", lambda event, item, **f: emitted.append((event, item, f))
    )
    plan = NetPlan((), 3128, frozenset({("localhost", echo)}), "http://127.0.0.1:9")
    try:
        directory = nets.open(ITEM, plan)
        tunnel = f"CONNECT localhost:{echo} HTTP/1.1\r\n\r\nthrough\n".encode()
        refused = talk_unix(directory / "proxy.sock", tunnel)
        assert refused.startswith(b"HTTP/1.1 403 Forbidden"), refused
        assert b"echo:" not in refused and b"not a public address" in refused
        plain = f"GET http://localhost:{echo}/ HTTP/1.1\r\n\r\n".encode()
        assert talk_unix(directory / "proxy.sock", plain).startswith(b"HTTP/1.1 403 Forbidden")
        assert [(e, f["target"]) for e, _, f in emitted] == [
            ("session.egress_refused", f"localhost:{echo}")
        ] * 2
        assert "resolves to" in emitted[0][2]["reason"]
        assert "not a public address" in emitted[0][2]["reason"]
    finally:
        nets.stop()


class _Listener(socketserver.ThreadingTCPServer):
    """A far end that takes a burst of connections at once: the default listen backlog of 5
    drops the rest of a burst's handshakes, to be retried a second or more later."""

    daemon_threads = True
    request_queue_size = 128


class _Lines(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while line := self.rfile.readline():
            self.wfile.write(b"echo: " + line)


def test_a_session_holds_at_most_its_share_of_a_route_and_others_keep_theirs(
    tmp_path: Path,
) -> None:
    lines = _Listener(("127.0.0.1", 0), _Lines)
    threading.Thread(target=lines.serve_forever, daemon=True).start()
    nets = SessionNetworks(tmp_path / "net", lambda event, item, **f: None)
    route = Route("lines.sock", 9999, "127.0.0.1", lines.server_address[1])
    plan = NetPlan((route,), 3128, frozenset(), "http://127.0.0.1:9")
    held: list[socket.socket] = []
    try:
        hoarder, other = nets.open(ITEM, plan), nets.open("github:o/r#2", plan)
        for _ in range(ROUTE_CONNECTIONS + 1):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(30)
            sock.connect(str(hoarder / "lines.sock"))
            held.append(sock)
        assert held[-1].recv(100) == b""  # one past its share: closed unserved
        for sock in held[:-1]:  # the share is served, and stays open
            sock.sendall(b"still\n")
            assert sock.recv(100) == b"echo: still\n"
        assert talk_unix(other / "lines.sock", b"mine\n") == b"echo: mine\n"
    finally:
        for sock in held:
            sock.close()
        nets.stop()
        lines.shutdown()
        lines.server_close()


def test_a_far_end_that_is_down_closes_the_connection_and_says_so_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    down = free_port()  # a port nobody listens on
    nets = SessionNetworks(tmp_path / "net", lambda event, item, **f: None)
    plan = NetPlan((Route("down.sock", 9999, "127.0.0.1", down),), 3128, frozenset(), "")
    try:
        directory = nets.open(ITEM, plan)
        logs = caplog.at_level("WARNING", logger="app.spawner.network.netgates")
        with logs, socket.socket(socket.AF_UNIX) as conn:
            conn.settimeout(30)  # it sends nothing: the relay may close before it could
            conn.connect(str(directory / "down.sock"))
            assert conn.recv(100) == b""
        assert f"{ITEM}: 127.0.0.1:{down} unreachable" in caplog.text
    finally:
        nets.stop()


def test_a_host_allowed_while_the_session_runs_is_let_through_at_once(
    tmp_path: Path, echo: int
) -> None:
    nets = SessionNetworks(tmp_path / "net", lambda *a, **f: None)
    plan = NetPlan((), 3128, frozenset(), "http://127.0.0.1:9")
    tunnel = f"CONNECT 127.0.0.1:{echo} HTTP/1.1\r\n\r\nagain\n".encode()
    try:
        assert nets.allow(ITEM, "127.0.0.1", echo) is False  # nothing served yet
        directory = nets.open(ITEM, plan)
        assert talk_unix(directory / "proxy.sock", tunnel).startswith(b"HTTP/1.1 403")
        assert nets.allow(ITEM, "127.0.0.1", echo) is True
        assert nets.allow("github:o/r#2", "127.0.0.1", echo) is False  # no such session
        assert talk_unix(directory / "proxy.sock", tunnel) == (
            b"HTTP/1.1 200 Connection established\r\n\r\necho: again\n"
        )
    finally:
        nets.stop()


def test_a_registry_the_devboxs_own_configuration_names_may_lie_on_its_private_network(
    tmp_path: Path, echo: int
) -> None:
    # The devbox's pip is configured with a mirror on its own network (here: its loopback).
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    registries = read_registries({**env, "PIP_INDEX_URL": f"http://localhost:{echo}/simple"})
    config = parse_config({"routing": {"sandbox": {"egress": ["python"]}}})
    plan = egress_plan("http://127.0.0.1:9", None, config.routing.sandbox, registries)
    written = parse_config({"routing": {"sandbox": {"egress": [f"localhost:{echo}"]}}})
    by_name = egress_plan("http://127.0.0.1:9", None, written.routing.sandbox, registries)
    nets = SessionNetworks(tmp_path / "net", lambda event, item, **f: None)
    try:
        tunnel = f"CONNECT localhost:{echo} HTTP/1.1\r\n\r\nthrough\n".encode()
        through = talk_unix(nets.open(ITEM, plan) / "proxy.sock", tunnel)
        assert through.endswith(b"echo: through\n"), through  # the preset's mirror: reached
        refused = talk_unix(nets.open("github:o/r#2", by_name) / "proxy.sock", tunnel)
        assert refused.startswith(b"HTTP/1.1 403") and b"not a public address" in refused
    finally:
        nets.stop()
