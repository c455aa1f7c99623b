"""Shared setup for the spawner-API tests: an App on a real port with a short job lease,
spawner tokens, work items and jobs in its store, and a small HTTP client for spawners."""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.fleet.tokens import create_token
from app.protocol import parse_payload
from app.store.jobqueue import queue_job
from app.store.tables import Job, JobKind, WorkItem, WorkItemStatus
from tests.fakes.github_api import FakeGitHub
from tests.fakes.server import LiveServer
from tests.support import APP_ID, app_env, fixture_json, post_webhook, scratch_database, wait_for

REPO = "Codertocat/Hello-World"
INSTALLATION = 1


@dataclass
class Api:
    url: str
    state: Any
    flask: Any
    fake: FakeGitHub
    fake_url: str = ""
    repo: str = REPO

    def fresh(self) -> Api:
        """A view of the shared App for one test: its own repository, so its own jobs."""
        return replace(self, repo=f"t{uuid.uuid4().hex[:10]}/Hello-World")

    def session(self) -> Session:
        return self.state.sessions(expire_on_commit=False)

    def token(self, name: str = "devbox", repositories: list[str] | None = None) -> str:
        """A spawner token; by default for this test's repository only."""
        with self.session() as session, session.begin():
            return create_token(session, name, repositories or [self.repo])

    def spawner(self, token: str) -> SpawnerClient:
        return SpawnerClient(self.url, token)

    def work_item(
        self,
        number: int = 1,
        repo: str | None = None,
        status: WorkItemStatus = WorkItemStatus.FROZEN,
        session: dict[str, Any] | None = None,
    ) -> str:
        repo = repo or self.repo
        work_item_id = f"github:{repo}#{number}"
        with self.session() as db, db.begin():
            db.add(
                WorkItem(
                    id=work_item_id,
                    repo_full_name=repo,
                    issue_number=number,
                    installation_id=INSTALLATION,
                    title=f"Issue {number}",
                    html_url=f"https://github.com/{repo}/issues/{number}",
                    clone_url=f"https://github.com/{repo}.git",
                    state=status,
                    frozen={"harness": "claude", "model": "", "effort": "", "skips": {}},
                    session=session,
                )
            )
        return work_item_id

    def queue(self, kind: JobKind, key: str, work_item_id: str, **payload: Any) -> int:
        repo = work_item_id.split(":", 1)[1].split("#", 1)[0]
        with self.session() as db, db.begin():
            unique = f"{key}@{work_item_id}"  # keys are global; tests share the database
            typed = parse_payload(kind, {"work_item_id": work_item_id, "repo": repo, **payload})
            job = queue_job(db, unique, typed)
            assert job is not None
            return job.id

    def item(self, work_item_id: str) -> WorkItem:
        with self.session() as db:
            item = db.get(WorkItem, work_item_id)
            assert item is not None
            return item

    def job(self, job_id: int) -> Job:
        with self.session() as db:
            job = db.get(Job, job_id)
            assert job is not None
            return job

    def events(self, name: str, work_item_id: str | None = None) -> list[dict[str, Any]]:
        from sqlalchemy import select

        from app.store.tables import Event

        with self.session() as db:
            query = select(Event).where(Event.event == name).order_by(Event.id)
            if work_item_id is not None:
                query = query.where(Event.work_item_id == work_item_id)
            return [row.data for row in db.scalars(query)]


class SpawnerClient:
    """What a devbox spawner sends, over real HTTP."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(
            base_url=f"{url}/spawner/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=40,
        )

    def register(self, **body: Any) -> httpx.Response:
        body.setdefault("name", "devbox")
        body.setdefault("harnesses", ["claude"])
        body.setdefault("version", "test")
        return self.client.post("/register", json=body)

    def poll(self, wait: float = 0) -> httpx.Response:
        return self.client.get("/jobs", params={"wait": wait})

    def job(self, wait: float = 0) -> dict[str, Any] | None:
        resp = self.poll(wait)
        if resp.status_code == 204:
            return None
        assert resp.status_code == 200, resp.text
        return resp.json()["job"]

    def heartbeat(self, job_id: int) -> httpx.Response:
        return self.client.post(f"/jobs/{job_id}/heartbeat")

    def clone_token(self, job_id: int) -> httpx.Response:
        return self.client.post(f"/jobs/{job_id}/token")

    def result(
        self, job_id: int, ok: bool = True, error: str | None = None, **result: Any
    ) -> httpx.Response:
        return self.client.post(
            f"/jobs/{job_id}/result", json={"ok": ok, "result": result, "error": error}
        )

    def events(self, *events: dict[str, Any]) -> httpx.Response:
        return self.client.post("/events", json={"events": list(events)})

    def comment(self, work_item_id: str, body: str, kind: str = "comment") -> httpx.Response:
        return self.client.post(
            "/comments", json={"work_item_id": work_item_id, "kind": kind, "body": body}
        )


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def shared_api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, app_private_key: str
) -> Iterator[Api]:
    """One App for a test module, on each backend. A module may set `SHARED_API` to
    `serve_api`'s keyword arguments, and narrow the backends by parametrizing this fixture."""
    options = getattr(request.module, "SHARED_API", {})
    directory = tmp_path_factory.mktemp(
        f"{request.module.__name__.rsplit('.', 1)[-1]}-{request.param}"
    )
    yield from serve_api(request.param, directory, app_private_key, **options)


@pytest.fixture
def api(shared_api: Api) -> Api:
    """This test's own repository on the module's App."""
    return shared_api.fresh()


def serve_api(
    kind: str,
    directory: Path,
    private_key: str,
    config_yaml: str = "{}\n",
    lease_seconds: float = 1,
    extra_env: dict[str, str] | None = None,
) -> Iterator[Api]:
    """The App with its spawner API and a fake GitHub, both on 127.0.0.1, for one module.

    Tests share it and keep apart by repository: `api.fresh()` gives each test its own.
    """
    from app.config.process_settings import load_settings
    from app.fleet.api import LEASE_CONFIG
    from app.runtime.flask_app import create_app

    fake = FakeGitHub(app_id=APP_ID, private_key_pem=private_key)
    config = directory / "cli-config.yaml"
    config.write_text(config_yaml)
    with scratch_database(kind, directory) as url, LiveServer(fake.wsgi()) as github:
        env = app_env(directory, url, github.url, private_key)  # with the config above
        env.update(extra_env or {})
        app = create_app(load_settings(env, dotenv=None))
        app.config[LEASE_CONFIG] = lease_seconds
        state = app.extensions["the-loop"]
        with LiveServer(app) as server:
            yield Api(url=server.url, state=state, flask=app, fake=fake, fake_url=github.url)
        state.close()  # the App's one shutdown, before its database is dropped


COMMENT_IDS = itertools.count(700_000_001)


def comment_delivery(
    repo: str, number: int, body: str, login: str = "octocat", kind: str = "User"
) -> dict:
    """The published issue_comment.created payload, re-pointed at `repo#number`."""
    payload = copy.deepcopy(fixture_json("github/issue_comment.created.with-installation.json"))
    owner, name = repo.split("/")
    payload["repository"].update(full_name=repo, name=name)
    payload["repository"]["owner"]["login"] = owner
    payload["issue"]["number"] = number
    payload["comment"].update(id=next(COMMENT_IDS), body=body)
    payload["comment"]["user"].update(login=login, type=kind)
    payload["sender"].update(login=login, type=kind)
    return payload


def inbox_rows(api, delivery: str):
    from app.store.tables import Delivery

    with api.session() as db:
        return list(db.scalars(select(Delivery).where(Delivery.delivery_id == delivery)))


def send(api, payload: dict, delivery: str | None = None) -> str:
    delivery = delivery or str(uuid.uuid4())
    resp = post_webhook(api.url, "issue_comment", payload, delivery=delivery)
    assert resp.status_code == 202, resp.text
    wait_for(lambda: inbox_rows(api, delivery) and inbox_rows(api, delivery)[0].state == "done")
    return delivery
