"""Webhook ingress over a real HTTP server: verify, store, acknowledge, dedupe, route."""

from __future__ import annotations

import json

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.store.models import Delivery, InboxState, Installation, Repository
from tests.support import fixture_bytes, post_webhook, signed_headers, wait_for


def test_ping_is_answered(running_app):
    resp = post_webhook(running_app.url, "ping", fixture_bytes("github/ping.with-app_id.json"))
    assert resp.status_code == 200
    assert resp.json()["zen"]


def test_forged_signature_is_refused_and_recorded(running_app):
    body = fixture_bytes("github/ping.json")
    resp = post_webhook(running_app.url, "ping", body, secret="not-the-secret", delivery="forged-1")
    assert resp.status_code == 401
    rejected = running_app.events("webhook.rejected")
    assert rejected and rejected[-1]["delivery"] == "forged-1"
    assert rejected[-1]["reason"] == "bad-signature"


def test_missing_signature_is_refused(running_app):
    body = fixture_bytes("github/ping.json")
    headers = signed_headers("ping", body)
    del headers["X-Hub-Signature-256"]
    resp = httpx.post(f"{running_app.url}/github/webhooks", content=body, headers=headers)
    assert resp.status_code == 401
    assert running_app.events("webhook.rejected")[-1]["reason"] == "missing-signature"


def test_malformed_json_is_a_400(running_app):
    body = b"{not json"
    resp = httpx.post(
        f"{running_app.url}/github/webhooks", content=body, headers=signed_headers("issues", body)
    )
    assert resp.status_code == 400


def test_oversized_body_is_a_413(running_app):
    body = b" " * (25 * 1024 * 1024 + 1)
    resp = httpx.post(
        f"{running_app.url}/github/webhooks",
        content=body,
        headers={**signed_headers("issues", b"{}"), "Content-Length": str(len(body))},
        timeout=30,
    )
    assert resp.status_code == 413


def test_installation_is_stored_then_handled_once(running_app):
    body = fixture_bytes("github/installation.created.json")
    first = post_webhook(running_app.url, "installation", body, delivery="inst-1")
    again = post_webhook(running_app.url, "installation", body, delivery="inst-1")
    assert first.status_code == 202 and first.json()["duplicate"] is False
    assert again.status_code == 202 and again.json()["duplicate"] is True

    def handled():
        with Session(running_app.state.engine) as s:
            row = s.scalars(select(Delivery).where(Delivery.delivery_id == "inst-1")).one()
            return row.state == InboxState.DONE

    wait_for(handled)
    with Session(running_app.state.engine) as s:
        inst = s.get(Installation, 957387)
        assert inst is not None and inst.account_login == "Codertocat"
        repos = s.scalars(select(Repository.full_name)).all()
        assert "Codertocat/Hello-World" in repos
        assert s.scalars(select(Delivery)).all().__len__() == 1
    assert len(running_app.events("installation.recorded")) == 1


def test_repositories_added_and_removed(running_app):
    post_webhook(running_app.url, "installation", fixture_bytes("github/installation.created.json"))
    added = json.loads(fixture_bytes("github/installation_repositories.added.json"))
    post_webhook(running_app.url, "installation_repositories", added)
    removed = json.loads(fixture_bytes("github/installation_repositories.removed.json"))
    post_webhook(running_app.url, "installation_repositories", removed)

    def repo_names():
        with Session(running_app.state.engine) as s:
            return set(s.scalars(select(Repository.full_name)))

    wait_for(lambda: len(running_app.events("installation.repositories")) == 2)
    names = repo_names()
    assert "Codertocat/Space" in names
    assert "octocat/Hello-World" not in names


def test_healthz(running_app):
    assert httpx.get(f"{running_app.url}/healthz").json()["ok"] is True
