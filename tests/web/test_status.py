"""`/status` and the operator credential: counts for a caller with the admin token, and
nothing for anyone else — loopback included, proxied or not."""

from __future__ import annotations

import httpx
import pytest

from app.web import auth
from tests.support import fixture_bytes, post_webhook, served_app, wait_for, wsgi_app

TOKEN = "a-long-enough-operator-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def admin_env(settings_env: dict[str, str]) -> dict[str, str]:
    return {**settings_env, "THE_LOOP_ADMIN_TOKEN": TOKEN}


def test_status_counts_deliveries(admin_env):
    with wsgi_app(admin_env) as app:
        post_webhook(app.url, "installation", fixture_bytes("github/installation.created.json"))
        status = wait_for(
            lambda: (
                (s := httpx.get(f"{app.url}/status", headers=BEARER).json())["inbox"].get("done")
                and s
            )
        )
    assert status["inbox"] == {"done": 1}
    assert status["parked_deliveries"] == []
    assert status["work_items"] == {}


def test_status_through_the_deployed_front_needs_the_token(admin_env):
    """Behind the ASGI front (and behind any proxy) a loopback peer proves nothing."""
    with served_app(admin_env) as app:
        post_webhook(app.url, "installation", fixture_bytes("github/installation.created.json"))
        status = wait_for(
            lambda: (
                (s := httpx.get(f"{app.url}/status", headers=BEARER).json())["inbox"].get("done")
                and s
            )
        )
        for headers in ({}, {"X-Forwarded-For": "127.0.0.1"}, {"Authorization": "Bearer wrong"}):
            refused = httpx.get(f"{app.url}/status", headers=headers)
            assert refused.status_code == 401, headers
            assert "THE_LOOP_ADMIN_TOKEN" in refused.json()["error"]
            assert "installation" not in refused.text
    assert status["inbox"] == {"done": 1}


def test_without_a_configured_token_every_operator_surface_is_forbidden(settings_env):
    with wsgi_app(settings_env) as app:
        for path in ("/", "/status", "/?token=anything-at-all-here"):
            refused = httpx.get(app.url + path, headers={"Accept": "text/html"})
            assert refused.status_code == 403, path
            assert "set THE_LOOP_ADMIN_TOKEN" in refused.text
        assert httpx.post(f"{app.url}/deliveries/retry", data={"delivery": "x"}).status_code == 403
        assert httpx.get(f"{app.url}/healthz").status_code == 200


def test_a_signed_in_session_expires_and_dies_with_the_token():
    now = 1_000_000.0
    cookie = auth.mint_session(TOKEN, now)
    assert auth.session_nonce(cookie, TOKEN, now + 60)
    assert auth.session_nonce(cookie, TOKEN, now + auth.SESSION_SECONDS + 1) is None
    assert auth.session_nonce(cookie, "another-operator-token", now + 60) is None
    issued, nonce, mac = cookie.split(".")
    assert auth.session_nonce(f"{issued}.{nonce}x.{mac}", TOKEN, now) is None
    assert auth.session_nonce(f"{int(issued) + 9}.{nonce}.{mac}", TOKEN, now) is None


def test_csrf_tokens_belong_to_one_session():
    one, two = (auth.session_nonce(auth.mint_session(TOKEN, 0), TOKEN, 1) for _ in range(2))
    assert one and two and one != two
    assert auth.csrf_ok(TOKEN, one, auth.csrf_token(TOKEN, one))
    assert not auth.csrf_ok(TOKEN, one, auth.csrf_token(TOKEN, two))
    assert not auth.csrf_ok(TOKEN, one, None) and not auth.csrf_ok(TOKEN, "", "")


@pytest.mark.parametrize(
    ("kwargs", "access"),
    [
        ({}, auth.Access.DENIED),
        ({"authorization": f"Bearer {TOKEN}"}, auth.Access.BEARER),
        ({"authorization": f"bearer {TOKEN}"}, auth.Access.BEARER),
        ({"authorization": "Bearer nope"}, auth.Access.DENIED),
        ({"authorization": f"Basic {TOKEN}"}, auth.Access.DENIED),
        ({"query_token": TOKEN}, auth.Access.LOGIN),
        ({"query_token": TOKEN[:-1]}, auth.Access.DENIED),
        ({"cookie": "1.2.3"}, auth.Access.DENIED),
        # A wrong credential denies even beside a right one.
        ({"authorization": "Bearer nope", "query_token": TOKEN}, auth.Access.DENIED),
    ],
)
def test_decide(kwargs, access):
    args = {"authorization": None, "query_token": None, "cookie": None, **kwargs}
    assert auth.decide(TOKEN, now=0, **args).access is access
    assert auth.decide(None, now=0, **args).access is auth.Access.NOT_CONFIGURED
