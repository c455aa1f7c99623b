"""A credential route served on a session's socket (the real `netgates` loop and the route's
server) in front of a loopback stand-in upstream that checks the credential: what reaches
the upstream, what comes back to the session, and what is counted."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.config.operator_config import parse_config
from app.spawner.network.credroutes import CredentialRoutes
from app.spawner.network.netgates import SessionNetworks
from app.spawner.network.netplan import plan_network
from app.spawner.network.routecreds import read_text, resolve_routes
from tests.fakes.credential_upstream import BIG, CredentialUpstream

TOKEN = "tok-9f8e7d6c5b4a"
BEARER = f"Bearer {TOKEN}"
ITEM = "github:o/r#7"


@pytest.fixture
def credentialed() -> Iterator[CredentialUpstream]:
    with CredentialUpstream(BEARER) as served:
        yield served


class Served:
    def __init__(self, tmp_path: Path, credentialed: CredentialUpstream, **extra: Any) -> None:
        entry = {
            "env": "STAGING_API_URL",
            "upstream": credentialed.url + "/simple",
            "headers": {"Authorization": "Bearer ${STAGING_TOKEN}"},
            **extra,
        }
        sandbox = parse_config({"routing": {"sandbox": {"routes": [entry]}}}, "ops.yaml")
        routes = resolve_routes(
            sandbox.routing.sandbox, {"STAGING_TOKEN": TOKEN}, read_text, "ops.yaml"
        )
        self.events: list[tuple[str, str | None, dict[str, Any]]] = []
        self.routes = CredentialRoutes(routes, self.emit)
        self.networks = SessionNetworks(tmp_path / "net", self.emit)
        plan = plan_network("http://127.0.0.1:9", None, [])
        plan, served, self.env = self.routes.served(plan, ITEM)
        self.socket = self.networks.open(ITEM, plan, served) / "route0.sock"
        self.client = httpx.Client(transport=httpx.HTTPTransport(uds=str(self.socket)), timeout=60)

    def emit(self, name: str, item: str | None, **fields: Any) -> None:
        self.events.append((name, item, fields))

    def close(self) -> None:
        self.client.close()
        self.networks.stop()


@pytest.fixture
def route(tmp_path: Path, credentialed: CredentialUpstream) -> Iterator[Served]:
    made = Served(tmp_path, credentialed)
    yield made
    made.close()


def test_the_upstream_gets_the_credential_and_the_session_only_a_loopback_url(
    route: Served, credentialed: CredentialUpstream
) -> None:
    url = route.env["STAGING_API_URL"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/simple")
    assert TOKEN not in repr(route.env)
    answer = route.client.get(url + "/ok", headers={"Authorization": "Bearer forged"})
    assert answer.status_code == 200 and answer.text.startswith("ok GET /simple/ok 0")
    assert credentialed.seen == [("GET", "/simple/ok", BEARER)]  # the session's own never crossed
    assert route.client.get(url + "/ok").status_code == 200  # kept alive, asked again
    assert route.routes.report() == 1
    assert route.events == [
        ("session.routes", ITEM, {"routes": {"STAGING_API_URL": {"requests": 2, "refused": 0}}})
    ]


def test_what_would_echo_the_credential_back_is_stripped(route: Served) -> None:
    url = route.env["STAGING_API_URL"]
    echoed = route.client.get(url + "/echo")
    assert echoed.status_code == 200 and TOKEN not in echoed.text
    assert '"authorization": "' + "*" * len(BEARER) + '"' in echoed.text  # same length
    challenged = route.client.get(url + "/challenge")
    assert challenged.status_code == 401
    assert "www-authenticate" not in challenged.headers and "set-cookie" not in challenged.headers
    here = route.client.get(url + "/here")
    assert here.status_code == 302
    assert here.headers["location"] == url + "/ok?from=here"  # back through the route
    away = route.client.get(url + "/away")
    assert away.headers["location"] == "http://elsewhere.example/x?from=away"  # no credential
    for answer in (echoed, challenged, here, away):
        assert TOKEN not in repr(answer.headers) + answer.text


def test_a_disallowed_method_or_path_is_refused_403_and_never_sent(
    tmp_path: Path, credentialed: CredentialUpstream
) -> None:
    made = Served(tmp_path, credentialed, allow=["GET /simple/", "POST /v1/test-runs"])
    try:
        url = made.env["STAGING_API_URL"]
        refused = made.client.delete(url + "/ok")
        assert refused.status_code == 403
        assert "DELETE /simple/ok is not allowed" in refused.text
        assert "routing.sandbox.routes[0].allow" in refused.text
        assert made.client.get(url.removesuffix("/simple") + "/admin").status_code == 403
        with socket.socket(socket.AF_UNIX) as raw:  # sent as written (a client would tidy it)
            raw.settimeout(30)
            raw.connect(str(made.socket))
            raw.sendall(b"GET /simple/../admin HTTP/1.1\r\nHost: x\r\n\r\n")
            assert raw.recv(1024).startswith(b"HTTP/1.1 403 Forbidden\r\n")
        posted = made.client.post(url.removesuffix("/simple") + "/v1/test-runs", content=b"run")
        assert posted.status_code == 200
        assert [(m, p) for m, p, _ in credentialed.seen if p.startswith("/admin")] == []
        assert ("DELETE", "/simple/ok", BEARER) not in credentialed.seen
        made.routes.report()
        counted = made.events[-1][2]["routes"]["STAGING_API_URL"]
        assert counted == {"requests": 1, "refused": 3}
    finally:
        made.close()


def test_bodies_stream_both_ways(route: Served, credentialed: CredentialUpstream) -> None:
    url = route.env["STAGING_API_URL"]
    big = b"0123456789abcdef" * (1 << 20)  # 16 MiB up, in chunks of a generator

    def pieces() -> Iterator[bytes]:
        for at in range(0, len(big), 1 << 20):
            yield big[at : at + (1 << 20)]

    sent = route.client.post(url + "/upload", content=pieces())
    assert sent.text == f"ok POST /simple/upload {len(big)} {hashlib.sha256(big).hexdigest()}"
    size = 0
    with route.client.stream("GET", url + "/big") as answer:
        for piece in answer.iter_bytes():
            size += len(piece)
    assert size == BIG


def test_a_raw_request_without_host_closes_the_connection_unanswered(route: Served) -> None:
    with socket.socket(socket.AF_UNIX) as raw:
        raw.settimeout(30)
        raw.connect(str(route.socket))
        raw.sendall(b"GET /simple/ok HTTP/1.1\r\n\r\n")
        assert raw.recv(1024) == b""
