"""The closed network's pure pieces: the routes a session gets, the App's URL inside, the
proxy's allow-list and its reading of a request, the relay's argv, and the bwrap argv of
each network mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config.operator_config import ConfigError, parse_config
from app.spawner.confine.isolation import MANAGED_DIR, host_plan
from app.spawner.confine.sandbox import INSIDE_DIR, Secret, sandbox_argv, unix_dirs
from app.spawner.network.netplan import (
    BadRequest,
    Route,
    app_url_inside,
    inward_address,
    needs_resolving,
    parse_proxy_head,
    permitted,
    plan_network,
    relay_argv,
)
from app.spawner.network.netrelay import parse_routes

GATEWAY = "http://127.0.0.1:41000"


def test_a_loopback_app_and_the_model_gateway_are_relayed_on_their_own_ports() -> None:
    plan = plan_network("http://127.0.0.1:8080", GATEWAY, ["PyPI.org:443"])
    assert plan.routes == (
        Route("model.sock", 41000),
        Route("app.sock", 8080, "127.0.0.1", 8080),
    )
    assert plan.proxy_port == 3128 and plan.app_url == "http://127.0.0.1:8080"
    assert plan.allowed == {("pypi.org", 443)}
    assert plan.env["HTTPS_PROXY"] == plan.env["http_proxy"] == "http://127.0.0.1:3128"
    assert plan.env["NO_PROXY"] == "127.0.0.1,localhost,::1"


def test_a_privileged_app_port_is_relayed_from_a_high_one_and_the_proxy_steps_aside() -> None:
    plan = plan_network("http://localhost:80/", "http://127.0.0.1:3128", [])
    assert plan.app_url == app_url_inside("http://localhost:80/") == "http://localhost:10080/"
    assert Route("app.sock", 10080, "localhost", 80) in plan.routes
    assert plan.proxy_port == 3129  # 3128 is the gateway's inside


def test_a_loopback_app_behind_tls_is_relayed_too_since_no_proxy_names_the_loopback() -> None:
    plan = plan_network("https://localhost:443", GATEWAY, [])
    assert plan.app_url == "https://localhost:10443"  # TLS names the host, not the port
    assert Route("app.sock", 10443, "localhost", 443) in plan.routes
    assert plan.allowed == frozenset()
    assert plan_network("https://127.0.0.1:8443", None, []).routes == (
        Route("app.sock", 8443, "127.0.0.1", 8443),
    )


def test_a_remote_app_goes_through_the_proxy_unchanged() -> None:
    plan = plan_network("https://loop.example.com", GATEWAY, [])
    assert [r.socket for r in plan.routes] == ["model.sock"]
    assert plan.app_url == "https://loop.example.com"
    assert plan.allowed == {("loop.example.com", 443)}


def test_the_allow_list_matches_whole_names_and_exact_ports() -> None:
    allowed = plan_network(GATEWAY, None, ["pypi.org:443", "[::1]:8000"]).allowed
    assert permitted(allowed, "PyPI.org", 443) and permitted(allowed, "pypi.org.", 443)
    assert permitted(allowed, "[::1]", 8000) and permitted(allowed, "::1", 8000)
    assert not permitted(allowed, "pypi.org", 80)
    assert not permitted(allowed, "evil.pypi.org", 443)
    assert not permitted(allowed, "pypi.org.evil.com", 443)


def test_the_proxy_reads_a_connect_and_rewrites_a_plain_request() -> None:
    tunnel = parse_proxy_head(b"CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
    assert (tunnel.host, tunnel.port, tunnel.tunnel) == ("pypi.org", 443, True)
    plain = parse_proxy_head(
        b"GET http://example.com:8080/a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\n"
        b"Proxy-Authorization: Basic eA==\r\nProxy-Connection: keep-alive\r\n\r\n"
    )
    assert (plain.host, plain.port, plain.tunnel) == ("example.com", 8080, False)
    assert plain.head == (
        b"GET /a?b=1 HTTP/1.1\r\nHost: example.com:8080\r\nConnection: close\r\n\r\n"
    )
    assert parse_proxy_head(b"GET http://example.com/ HTTP/1.0\r\n\r\n").port == 80


@pytest.mark.parametrize(
    "head",
    [
        b"GET https://example.com/ HTTP/1.1\r\n\r\n",  # TLS goes by CONNECT
        b"GET /relative HTTP/1.1\r\n\r\n",
        b"CONNECT example.com HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:0 HTTP/1.1\r\n\r\n",
        b"CONNECT example.com:443 HTTP/2\r\n\r\n",
        b"\xff\xfe\r\n\r\n",
    ],
)
def test_the_proxy_refuses_what_it_cannot_act_on(head: bytes) -> None:
    with pytest.raises(BadRequest):
        parse_proxy_head(head)


def test_the_relay_argv_round_trips() -> None:
    plan = plan_network("http://localhost:8080", GATEWAY, [])
    argv = relay_argv("/py/bin/python", "/code/netrelay.py", plan, ["claude", "--resume", "x"])
    assert argv[:5] == ["/py/bin/python", "-S", "/code/netrelay.py", "--dir", str(INSIDE_DIR)]
    directory, routes, child = parse_routes(argv[3:])
    assert directory == str(INSIDE_DIR) and child == ["claude", "--resume", "x"]
    assert routes == [
        ("127.0.0.1", 41000, "model.sock"),
        ("localhost", 8080, "app.sock"),
        ("127.0.0.1", 3128, "proxy.sock"),
    ]


@pytest.mark.parametrize(
    ("sandbox", "key"),
    [
        ({"network": "open"}, "routing.sandbox.network"),
        ({"egress": ["pypi.org"]}, "routing.sandbox.egress[0]"),
        ({"egress": ["pypi.org:70000"]}, "routing.sandbox.egress[0]"),
        ({"egress": ["http://pypi.org:443"]}, "routing.sandbox.egress[0]"),
    ],
)
def test_a_bad_network_setting_names_its_key_and_file(sandbox: dict, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config({"routing": {"sandbox": sandbox}}, "/etc/the-loop/cli-config.yaml")
    assert str(caught.value).startswith(f"/etc/the-loop/cli-config.yaml: {key}: ")


def test_each_network_mode_has_its_argv(tmp_path: Path) -> None:
    sandbox = parse_config({}).routing.sandbox
    checkout, home, sockets, managed = (tmp_path / n for n in ("c", "h", "s", "m"))
    for path in (checkout, home, sockets, managed):
        path.mkdir()
    secrets = [Secret(Path("/etc/shadow"), directory=False)]
    common = {"sandbox": sandbox, "checkout": checkout, "home": home, "env": {}}
    shared = sandbox_argv(host_plan(**common, hidden=secrets), ["claude"])
    assert "--unshare-net" not in shared
    closed = sandbox_argv(
        host_plan(**common, hidden=secrets, sockets=sockets, managed=(managed, MANAGED_DIR)),
        ["claude"],
    )
    assert "--unshare-net" in closed
    at = closed.index(str(INSIDE_DIR))
    assert closed[at - 2 : at + 1] == ["--ro-bind", str(sockets), str(INSIDE_DIR)]
    at = closed.index(str(MANAGED_DIR))
    assert closed[at - 2 : at + 1] == ["--ro-bind", str(managed), str(MANAGED_DIR)]
    if not MANAGED_DIR.exists():  # /etc shown entry by entry, its secrets left out
        pairs = list(zip(closed, closed[1:], closed[2:], strict=False))
        assert ("--ro-bind", "/etc", "/etc") not in pairs
        assert ("--ro-bind", "/etc/passwd", "/etc/passwd") in pairs
        assert "/etc/shadow" not in closed  # neither bound nor needing a cover


@pytest.mark.parametrize(
    ("addresses", "inward"),
    [
        (["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"], None),
        (["93.184.215.14", "127.0.0.1"], "127.0.0.1"),  # one inward answer is enough
        (["10.1.2.3"], "10.1.2.3"),
        (["192.168.0.7"], "192.168.0.7"),
        (["169.254.169.254"], "169.254.169.254"),  # a cloud's metadata service
        (["0.0.0.0"], "0.0.0.0"),
        (["::1"], "::1"),
        (["fe80::1%eth0"], "fe80::1%eth0"),
        (["fd00::5"], "fd00::5"),
        (["::ffff:127.0.0.1"], "::ffff:127.0.0.1"),
        (["100.64.0.9"], "100.64.0.9"),
        (["224.0.0.251"], "224.0.0.251"),
    ],
)
def test_a_name_that_resolves_inward_is_found_out(addresses: list[str], inward: str) -> None:
    assert inward_address(addresses) == inward


def test_listed_names_are_resolved_and_checked_but_written_addresses_and_the_app_are_not() -> None:
    plan = plan_network("https://loop.example.com", GATEWAY, ["localhost:8000", "10.0.0.5:80"])
    assert needs_resolving(plan, "localhost", 8000)
    assert needs_resolving(plan, "LocalHost.", 8000)
    assert not needs_resolving(plan, "10.0.0.5", 80)
    assert not needs_resolving(plan, "[::1]", 8000)
    assert not needs_resolving(plan, "loop.example.com", 443)  # the App, on the operator's net


def test_the_devboxs_listed_services_are_relayed_at_their_own_address() -> None:
    services = ["127.0.0.1:5432", "localhost:6379", "/run/pg/.s.PGSQL.5432"]
    plan = plan_network(GATEWAY, GATEWAY, [], services)
    assert plan.routes == (
        Route("model.sock", 41000),
        Route("svc0.sock", 5432),
        Route("svc1.sock", 6379, "localhost"),
        Route("svc2.sock", 0, "/run/pg/.s.PGSQL.5432"),
    )
    argv = relay_argv("python3", "/relay.py", plan, ["claude"])
    assert parse_routes(argv[3:])[1][-2] == ("/run/pg/.s.PGSQL.5432", 0, "svc2.sock")
    assert [str(d) for d in unix_dirs(services)] == ["/run/pg"]  # a tmpfs inside, for it
    with pytest.raises(ValueError, match="41000 is relayed already"):
        plan_network(GATEWAY, GATEWAY, [], ["127.0.0.1:41000"])
