"""`/status` shows deliveries and work items to a loopback caller."""

from __future__ import annotations

import httpx

from tests.support import fixture_bytes, post_webhook, served_app, wait_for


def test_status_counts_deliveries(running_app):
    post_webhook(running_app.url, "installation", fixture_bytes("github/installation.created.json"))
    status = wait_for(
        lambda: (s := httpx.get(f"{running_app.url}/status").json())["inbox"].get("done") and s
    )
    assert status["inbox"] == {"done": 1}
    assert status["parked_deliveries"] == []
    assert status["work_items"] == {}


def test_status_through_the_deployed_front(settings_env):
    """Through `the-loop serve` the Flask routes sit behind the ASGI front; `/status` still
    sees a loopback caller and counts what the worker handled."""
    with served_app(settings_env) as app:
        post_webhook(app.url, "installation", fixture_bytes("github/installation.created.json"))
        status = wait_for(
            lambda: (s := httpx.get(f"{app.url}/status").json())["inbox"].get("done") and s
        )
    assert status["inbox"] == {"done": 1}
