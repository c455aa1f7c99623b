"""Credential routes' pure parts: the config's shape, the credential read at the spawner's
start, the allow rules, what crosses a route each way, and the body scrubber."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from app.config.operator_config import ConfigError, OperatorConfig, parse_config
from app.spawner.network.netplan import plan_network
from app.spawner.network.routecreds import ResolvedRoute, read_text, resolve_routes, variables_of
from app.spawner.network.routerules import (
    Scrubber,
    incoming_headers,
    outgoing_headers,
    refusal,
    route_env,
    with_routes,
)

TOKEN = "s3cr3t-staging-token"
HERE = "http://127.0.0.1:17470"


def config(*routes: dict[str, Any], **sandbox: Any) -> OperatorConfig:
    return parse_config({"routing": {"sandbox": {"routes": list(routes), **sandbox}}}, "ops.yaml")


def resolved(*routes: dict[str, Any], env: dict[str, str] | None = None) -> list[ResolvedRoute]:
    sandbox = config(*routes).routing.sandbox
    return list(
        resolve_routes(
            sandbox, {"STAGING_TOKEN": TOKEN} if env is None else env, read_text, "ops.yaml"
        )
    )


STAGING = {
    "env": "STAGING_API_URL",
    "upstream": "https://api.staging.example.com",
    "headers": {"Authorization": "Bearer ${STAGING_TOKEN}"},
}


def test_a_header_takes_its_credential_from_the_spawners_environment() -> None:
    (route,) = resolved(STAGING)
    assert route.upstream.sent_credential == ((b"authorization", b"Bearer " + TOKEN.encode()),)
    assert variables_of([route]) == {"STAGING_TOKEN"}  # removed from the spawner's env
    assert TOKEN.encode() in route.secrets
    assert route.allow == (("*", "/"),)  # by default: anything under the upstream's path


def test_basic_auth_and_a_file_reference_are_read_at_start(tmp_path: Path) -> None:
    password = tmp_path / "pkg-pass"
    password.write_text("hunter22\n")
    key = tmp_path / "key"
    key.write_text("k-123456")
    (route,) = resolved(
        {
            "env": "PIP_INDEX_URL",
            "upstream": "https://pkgs.example.com/simple/",
            "headers": {"X-Api-Key": f"${{file:{key}}}"},
            "basicAuth": {"usernameEnv": "PKG_USER", "passwordFile": str(password)},
        },
        env={"PKG_USER": "ci"},
    )
    basic = base64.b64encode(b"ci:hunter22")
    assert dict(route.upstream.sent_credential) == {
        b"x-api-key": b"k-123456",
        b"authorization": b"Basic " + basic,
    }
    assert {b"hunter22", b"ci:hunter22", basic} <= set(route.secrets)
    assert route.allow == (("*", "/simple"),)


@pytest.mark.parametrize(
    ("route", "env", "words"),
    [
        (STAGING, {}, "ops.yaml: routing.sandbox.routes[0].headers.Authorization: "),
        (
            {**STAGING, "headers": {}, "basicAuth": {"username": "u", "passwordFile": "/nowhere"}},
            {},
            "routes[0].basicAuth.passwordFile: /nowhere cannot be read",
        ),
        (
            {**STAGING, "headers": {}, "basicAuth": {"username": "u", "passwordEnv": "NOPE"}},
            {},
            "routes[0].basicAuth.passwordEnv: the spawner's environment has no NOPE",
        ),
    ],
)
def test_a_credential_that_cannot_be_read_stops_the_spawner_naming_key_and_file(
    route: dict[str, Any], env: dict[str, str], words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        resolved(route, env=env)
    assert words in str(raised.value)
    assert str(raised.value).startswith("ops.yaml: routing.sandbox.routes[0]")


@pytest.mark.parametrize(
    ("route", "words"),
    [
        ({"upstream": "https://x.example"}, "routing.sandbox.routes[0].env: Field required"),
        ({**STAGING, "env": "PATH"}, "routes[0].env: Value error, 'PATH' is a variable"),
        ({**STAGING, "env": "ANTHROPIC_BASE_URL"}, "is a variable the session's environment"),
        ({**STAGING, "env": "https_proxy"}, "is a variable the session's environment"),
        ({**STAGING, "upstream": "https://u:p@x.example"}, "not in the URL"),
        ({**STAGING, "allow": ["get /simple/"]}, "routes[0].allow[0]"),
        ({**STAGING, "allow": ["TRACE /"]}, "routes[0].allow[0]"),
        ({**STAGING, "headers": {"A": "${oops"}}, "routes[0].headers.A"),
    ],
)
def test_a_bad_route_is_refused_naming_the_key_and_the_file(
    route: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        config(route)
    assert str(raised.value).startswith("ops.yaml: routing.sandbox.routes")
    assert words in str(raised.value)


def test_two_routes_may_not_set_one_variable_nor_run_on_the_hosts_network() -> None:
    with pytest.raises(ConfigError, match="two routes set STAGING_API_URL"):
        config(STAGING, STAGING)
    sandbox = config(STAGING, network="host").routing.sandbox
    with pytest.raises(
        ConfigError, match=r"routing\.sandbox\.routes: needs routing\.sandbox\.network"
    ):
        resolve_routes(sandbox, {"STAGING_TOKEN": TOKEN}, read_text, "ops.yaml")


def test_allow_rules_name_a_method_and_a_path_prefix() -> None:
    (route,) = resolved({**STAGING, "allow": ["GET /simple/", "POST /v1/test-runs"]})
    assert refusal(route, "GET", "/simple/requests/?x=1") is None
    assert refusal(route, "POST", "/v1/test-runs") is None
    assert refusal(route, "POST", "/v1/test-runs/7") is None
    for method, target in [
        ("POST", "/simple/x"),
        ("GET", "/v1/test-runs"),
        ("POST", "/v1/test-runsX"),
        ("GET", "/simple"),
        ("GET", "/admin"),
        ("GET", "/simple/../admin"),
        ("GET", "/simple/%2e%2e/admin"),
        ("GET", "/simple/..%2fadmin"),
        ("GET", "http://elsewhere.example/simple/"),
    ]:
        why = refusal(route, method, target)
        assert why is not None and why.startswith("the-loop route STAGING_API_URL: "), target
    assert "routing.sandbox.routes[0].allow: GET /simple/, POST /v1/test-runs" in (
        refusal(route, "DELETE", "/simple/x") or ""
    )
    (open_route,) = resolved(STAGING)
    assert refusal(open_route, "TRACE", "/") is not None  # it would echo the credential


def test_the_sessions_own_credential_never_crosses_and_the_routes_is_added() -> None:
    (route,) = resolved(STAGING)
    sent = outgoing_headers(
        [
            (b"host", b"127.0.0.1:17470"),
            (b"authorization", b"Bearer mine"),
            (b"proxy-authorization", b"x"),
            (b"connection", b"keep-alive"),
            (b"accept", b"*/*"),
            (b"content-length", b"3"),
        ],
        route,
    )
    assert sent == [
        (b"host", b"api.staging.example.com"),
        (b"accept", b"*/*"),
        (b"content-length", b"3"),
        (b"authorization", b"Bearer " + TOKEN.encode()),
    ]


def test_answers_lose_challenges_cookies_and_anything_holding_a_secret() -> None:
    (route,) = resolved(STAGING)
    got = incoming_headers(
        [
            (b"WWW-Authenticate", b'Bearer realm="staging"'),
            (b"Set-Cookie", b"session=abc"),
            (b"X-Echo", b"Bearer " + TOKEN.encode()),
            (b"Location", b"https://api.staging.example.com/v2/x?y=1"),
            (b"Content-Type", b"text/plain"),
        ],
        route,
        HERE,
    )
    assert got == [(b"Location", HERE.encode() + b"/v2/x?y=1"), (b"Content-Type", b"text/plain")]
    elsewhere = [(b"location", b"https://cdn.example.net/f.whl?sig=1")]
    assert incoming_headers(elsewhere, route, HERE) == elsewhere  # followed without credential
    relative = [(b"location", b"/v2/y")]
    assert incoming_headers(relative, route, HERE) == relative
    other_port = [(b"location", b"https://api.staging.example.com:8443/x")]
    assert incoming_headers(other_port, route, HERE) == other_port


def test_the_scrubber_masks_a_secret_split_across_pieces_keeping_the_length() -> None:
    scrub = Scrubber([TOKEN.encode()])
    body = b"before " + TOKEN.encode() + b" after " + TOKEN.encode()
    pieces = [body[i : i + 5] for i in range(0, len(body), 5)]
    out = b"".join(scrub.feed(piece) for piece in pieces) + scrub.end()
    assert len(out) == len(body) and TOKEN.encode() not in out
    assert out == b"before " + b"*" * len(TOKEN) + b" after " + b"*" * len(TOKEN)
    assert Scrubber([]).feed(b"as is") == b"as is"


def test_each_route_gets_a_free_port_inside_and_its_variable_keeps_the_path() -> None:
    routes = resolved(
        STAGING, {"env": "PIP_INDEX_URL", "upstream": "https://pkgs.example.com/simple"}
    )
    plan = plan_network("http://127.0.0.1:17470", "http://127.0.0.1:4000", [])
    extended, ports = with_routes(plan, routes)
    assert ports == {"STAGING_API_URL": 17471, "PIP_INDEX_URL": 17472}  # 17470 is the App's
    assert [r.socket for r in extended.routes][-2:] == ["route0.sock", "route1.sock"]
    assert route_env(routes, ports) == {
        "STAGING_API_URL": "http://127.0.0.1:17471",
        "PIP_INDEX_URL": "http://127.0.0.1:17472/simple",
    }
    assert with_routes(plan, routes) == (extended, ports)  # a restarted spawner: the same


def test_config_check_shows_each_route_without_its_header_values() -> None:
    from app.commands.configcheck import understood_rows

    literal = {**STAGING, "headers": {"X-Key": "inline-secret-value"}, "allow": ["GET /v1/"]}
    rows = dict(understood_rows(config(literal)))
    shown = rows["routing.sandbox.routes[STAGING_API_URL]"]
    assert shown == "https://api.staging.example.com, adding X-Key; allows GET /v1/"
    assert "inline-secret-value" not in repr(rows)
