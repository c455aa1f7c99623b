"""Webhook ingress over real HTTP servers: verify, store, acknowledge, dedupe, route.

Every test runs against both fronts of the App: `the-loop serve` (gunicorn's asgi worker,
what is deployed; on SQLite, as test_durability runs it on PostgreSQL too) and the plain
WSGI App (`gunicorn 'app.runtime:create_app()'`) on SQLite and PostgreSQL. Tests of what the App
stores get an App and a store of their own (`running_app`); tests of answers alone share
one per front (`shared_app`), as GitHub's deliveries share one deployed App.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import select, text

from app.store.tables import Delivery, InboxState, Installation, Repository
from tests.fakes.github_api import FakeGitHub
from tests.fakes.server import LiveServer
from tests.support import (
    APP_ID,
    RunningApp,
    app_env,
    fixture_bytes,
    post_webhook,
    scratch_database,
    served_app,
    signed_headers,
    wait_for,
    wsgi_app,
)


@pytest.fixture(
    scope="module",
    params=[
        ("serve", "sqlite"),
        ("wsgi", "sqlite"),
        pytest.param(("wsgi", "postgres"), marks=pytest.mark.postgres),
    ],
    ids=lambda pair: "-".join(pair),
)
def front(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param


# A test that needs an App of its own gets one per front too (`served`: `the-loop serve`).
FRONTS = pytest.mark.parametrize(
    "database_url",
    [
        pytest.param("sqlite", marks=pytest.mark.served, id="serve-sqlite"),
        pytest.param("sqlite", id="wsgi-sqlite"),
        pytest.param("postgres", marks=pytest.mark.postgres, id="wsgi-postgres"),
    ],
    indirect=True,
)


@pytest.fixture(scope="module")
def shared_app(
    front: tuple[str, str], tmp_path_factory: pytest.TempPathFactory, app_private_key: str
) -> Iterator[RunningApp]:
    """One App per front for the module's tests that leave nothing another reads: each
    reads only its answer, or the event its own request just caused."""
    directory = tmp_path_factory.mktemp("shared-app")
    github = FakeGitHub(app_id=APP_ID, private_key_pem=app_private_key)
    with (
        scratch_database(front[1], directory) as url,
        LiveServer(github.wsgi()) as api,
        (served_app if front[0] == "serve" else wsgi_app)(
            app_env(directory, url, api.url, app_private_key)
        ) as app,
    ):
        yield app


def test_ping_is_answered(shared_app):
    resp = post_webhook(shared_app.url, "ping", fixture_bytes("github/ping.with-app_id.json"))
    assert resp.status_code == 200
    assert resp.json()["zen"]


def test_forged_signature_is_refused_and_recorded(shared_app):
    body = fixture_bytes("github/ping.json")
    resp = post_webhook(shared_app.url, "ping", body, secret="not-the-secret", delivery="forged-1")
    assert resp.status_code == 401
    rejected = shared_app.events("webhook.rejected")
    assert rejected and rejected[-1]["delivery"] == "forged-1"
    assert rejected[-1]["reason"] == "bad-signature"


def test_missing_signature_is_refused(shared_app):
    body = fixture_bytes("github/ping.json")
    headers = signed_headers("ping", body)
    del headers["X-Hub-Signature-256"]
    resp = httpx.post(f"{shared_app.url}/github/webhooks", content=body, headers=headers)
    assert resp.status_code == 401
    assert shared_app.events("webhook.rejected")[-1]["reason"] == "missing-signature"


@pytest.mark.parametrize("body", [b"{not json", b'["an", "array"]'], ids=["malformed", "array"])
def test_a_body_that_is_not_a_json_object_is_a_400(shared_app, body):
    resp = httpx.post(
        f"{shared_app.url}/github/webhooks", content=body, headers=signed_headers("issues", body)
    )
    assert resp.status_code == 400


def test_oversized_body_is_a_413(shared_app):
    body = b" " * (25 * 1024 * 1024 + 1)
    resp = httpx.post(
        f"{shared_app.url}/github/webhooks",
        content=body,
        headers={**signed_headers("issues", b"{}"), "Content-Length": str(len(body))},
        timeout=30,
    )
    assert resp.status_code == 413


@FRONTS
def test_installation_is_stored_then_handled_once(running_app):
    body = fixture_bytes("github/installation.created.json")
    first = post_webhook(running_app.url, "installation", body, delivery="inst-1")
    again = post_webhook(running_app.url, "installation", body, delivery="inst-1")
    assert first.status_code == 202 and first.json()["duplicate"] is False
    assert again.status_code == 202 and again.json()["duplicate"] is True

    def handled():
        with running_app.state.sessions() as s:
            row = s.scalars(select(Delivery).where(Delivery.delivery_id == "inst-1")).one()
            return row.state == InboxState.DONE

    wait_for(handled)
    with running_app.state.sessions() as s:
        inst = s.get(Installation, 957387)
        assert inst is not None and inst.account_login == "Codertocat"
        repos = s.scalars(select(Repository.full_name)).all()
        assert "Codertocat/Hello-World" in repos
        assert s.scalars(select(Delivery)).all().__len__() == 1
    assert len(running_app.events("installation.recorded")) == 1


@FRONTS
def test_repositories_added_and_removed(running_app):
    post_webhook(running_app.url, "installation", fixture_bytes("github/installation.created.json"))
    added = json.loads(fixture_bytes("github/installation_repositories.added.json"))
    post_webhook(running_app.url, "installation_repositories", added)
    removed = json.loads(fixture_bytes("github/installation_repositories.removed.json"))
    post_webhook(running_app.url, "installation_repositories", removed)

    def repo_names():
        with running_app.state.sessions() as s:
            return set(s.scalars(select(Repository.full_name)))

    wait_for(lambda: len(running_app.events("installation.repositories")) == 2)
    names = repo_names()
    assert "Codertocat/Space" in names
    assert "octocat/Hello-World" not in names


def test_healthz(shared_app):
    assert httpx.get(f"{shared_app.url}/healthz").json()["ok"] is True


def test_only_post_is_allowed(shared_app):
    resp = httpx.get(f"{shared_app.url}/github/webhooks")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "POST"


@FRONTS
def test_a_delivery_no_handler_routes_is_stored_done_and_recorded(running_app):
    body = fixture_bytes("github/issues.opened.json")
    resp = post_webhook(running_app.url, "issues", body, delivery="opened-1")
    assert resp.status_code == 202 and resp.json() == {"delivery": "opened-1", "duplicate": False}
    with running_app.state.sessions() as s:
        row = s.scalars(select(Delivery).where(Delivery.delivery_id == "opened-1")).one()
        assert row.state == InboxState.DONE and row.done_at is not None
        assert row.body == body  # read back whole, however it is stored
        stored = s.execute(text("SELECT body FROM inbox WHERE delivery_id = 'opened-1'")).scalar()
        assert len(stored) < len(body) / 3  # kept compressed
    received = running_app.events("webhook.received")
    assert [(e["delivery"], e["action"], e["routed"]) for e in received] == [
        ("opened-1", "opened", False)
    ]
    again = post_webhook(running_app.url, "issues", body, delivery="opened-1")
    assert again.json()["duplicate"] is True
    assert len(running_app.events("webhook.received")) == 1


@FRONTS
def test_a_routed_delivery_is_recorded_when_received(running_app):
    body = fixture_bytes("github/installation.created.json")
    post_webhook(running_app.url, "installation", body, delivery="inst-9")
    received = running_app.events("webhook.received")
    assert [(e["delivery"], e["routed"]) for e in received] == [("inst-9", True)]


@FRONTS
def test_a_signed_body_replayed_is_stored_once_whatever_its_headers_say(running_app):
    body = fixture_bytes("github/installation.created.json")
    assert post_webhook(running_app.url, "installation", body, delivery="orig-1").status_code == 202
    replay = post_webhook(running_app.url, "installation", body, delivery="replay-1")
    assert replay.status_code == 202 and replay.json()["duplicate"] is True
    renamed = post_webhook(running_app.url, "installation_repositories", body, delivery="replay-2")
    assert renamed.status_code == 400 and "X-GitHub-Event" in renamed.json()["error"]
    with running_app.state.sessions() as s:
        assert [d.delivery_id for d in s.scalars(select(Delivery))] == ["orig-1"]
    (refused,) = running_app.events("webhook.rejected")
    assert (refused["reason"], refused["delivery"]) == ("shape-mismatch", "replay-2")
    assert [e["delivery"] for e in running_app.events("webhook.received")] == ["orig-1"]


# For the events whose shape the App checks, a published example of that event: the body
# GitHub would send for another action differs in `action` only as far as the check reads.
EXAMPLES = {
    "issues": "github/issues.opened.json",
    "issue_comment": "github/issue_comment.edited.json",
    "installation": "github/installation.created.json",
    "installation_repositories": "github/installation_repositories.added.json",
    "pull_request": "github/pull_request.opened.json",
    "pull_request_review": "github/pull_request_review.submitted.json",
    "pull_request_review_comment": "github/pull_request_review_comment.created.json",
    "check_run": "github/check_run.completed.failure.json",
    "check_suite": "github/check_suite.completed.json",
}


def documented_deliveries() -> list[tuple[str, str | None]]:
    """Every (event, action) GitHub's webhook schema documents (tests/data/github/README.md)
    that the App does not route: those it routes are replayed from published examples."""
    from app.runtime.event_routes import ROUTES

    events = json.loads(fixture_bytes("github/webhook-events.json"))["events"]
    pairs = [(e, a) for e, actions in events.items() for a in (actions or [None])]
    return [(e, a) for e, a in pairs if (e, a) not in ROUTES and e != "ping"]


def documented_body(n: int, event: str, action: str | None) -> dict[str, object]:
    """A body for `event`: its published example where the App checks its shape, else the
    keys every delivery to an App carries. Each body differs (the store keeps a body once)."""
    if event in EXAMPLES:
        base = json.loads(fixture_bytes(EXAMPLES[event]))
    else:
        base = {"installation": {"id": 1}, "sender": {"login": "octocat", "id": n, "type": "User"}}
    return (
        {**base, "action": action} if action else {k: v for k, v in base.items() if k != "action"}
    )


@FRONTS
def test_every_documented_event_name_is_accepted_and_stored_done(running_app):
    from app.github.shapes import SHAPES

    assert set(SHAPES) <= set(EXAMPLES)  # a newly checked event needs its example here
    pairs = documented_deliveries()
    assert ("projects_v2_item", "created") in pairs
    assert ("projects_v2_status_update", "edited") in pairs
    for n, (event, action) in enumerate(pairs):
        body = documented_body(n, event, action)
        resp = post_webhook(running_app.url, event, body, delivery=f"doc-{n}")
        assert resp.status_code == 202, (event, action, resp.text)
    with running_app.state.sessions() as s:
        rows = s.scalars(select(Delivery).where(Delivery.delivery_id.like("doc-%"))).all()
        assert len(rows) == len(pairs)
        assert {(r.event, r.action) for r in rows} == set(pairs)
        assert {r.state for r in rows} == {InboxState.DONE}
    received = {e["gh_event"] for e in running_app.events("webhook.received")}
    assert {e for e, _ in pairs} <= received
