"""The pull-request test bed: the App (with the Slack mirror) and the fake GitHub on loopback,
a git-over-HTTP server that accepts exactly the tokens the fake GitHub minted (write only
for `contents: write`), and a session started the real way — label, execute, a spawner's
claim over HTTP, the spawner's own `run_job` (checkout, work branch, credential helper,
tmux) with a stand-in harness — whose recorded environment is what the "agent" commands
run with."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import select

from app.config.operator_config import parse_config
from app.fleet.tokens import create_token
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.jobkinds import run_job
from app.spawner.registry import Registry
from app.spawner.session.tmux import TmuxRunner
from app.store.tables import Event, Job, JobKind, WorkItem
from tests.claude_support import claude_binary
from tests.devbox_support import running_devbox, scripted_env, scripted_home
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.git_http import GitHttp
from tests.fakes.github_api import FakeGitHub
from tests.fakes.server import LiveServer
from tests.fakes.slack_api import FakeSlack
from tests.gate_support import comment, deliver, labeled
from tests.spawner_support import TEST_PASS_ENV, StandIn, git
from tests.spawnerapi_support import SpawnerClient
from tests.support import RunningApp, fixture_json, with_installation

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data" / "github"
REPO = "Codertocat/Hello-World"
# The threads of the App under plain gunicorn (`indirect` "gunicorn"): fewer than the git
# requests a test opens, more than a session may hold.
GUNICORN_THREADS = 8
ITEM = f"github:{REPO}#1"
SPEC = "issue-1"
BRANCH = "the-loop/issue-1"
CHANNEL = "C0PULLS"
CONFIG = f"""
routing:
  completion: {{stopSession: true}}
slack:
  channel: {CHANNEL}
"""
AUTHOR_ENV = {
    "GIT_AUTHOR_NAME": "agent",
    "GIT_AUTHOR_EMAIL": "agent@example.com",
    "GIT_COMMITTER_NAME": "agent",
    "GIT_COMMITTER_EMAIL": "agent@example.com",
}


def data_json(name: str) -> dict[str, Any]:
    """A published payload from tests/data/github (see its README), ready to edit."""
    import json

    return json.loads((DATA / name).read_bytes())


def accept_minted(fake: FakeGitHub) -> Any:
    """The git server's rule: a token the fake GitHub minted, unexpired, for this repository,
    with `contents: write` to push (read or write to fetch)."""

    def accept(token: str, repository: str, push: bool) -> bool:
        minted = fake.tokens.get(token)
        if minted is None or minted["expires"] < datetime.now(UTC):
            return False
        names = minted.get("repositories")
        if names is not None and repository.split("/")[-1] not in names:
            return False
        contents = (minted.get("permissions") or {}).get("contents")
        return contents == "write" if push else contents in ("read", "write")

    return accept


@dataclass
class Bed:
    app: RunningApp
    fake: FakeGitHub
    slack: FakeSlack
    git: GitHttp
    git_url: str
    tmp: Path

    def clone_url(self, repo: str = REPO) -> str:
        return f"{self.git_url}/{repo}.git"

    def send(self, event: str, payload: dict[str, Any]) -> str:
        delivery = str(uuid.uuid4())
        deliver(self.app, event, payload, delivery)
        return delivery

    def item(self, work_item_id: str = ITEM) -> WorkItem:
        with self.app.state.sessions() as db:
            row = db.get(WorkItem, work_item_id)
            assert row is not None
            db.expunge(row)
            return row

    def jobs(self, kind: JobKind, work_item_id: str = ITEM) -> list[Job]:
        with self.app.state.sessions() as db:
            query = select(Job).where(Job.kind == kind, Job.work_item_id == work_item_id)
            rows = list(db.scalars(query.order_by(Job.id)))
            for row in rows:
                db.expunge(row)
            return rows

    def events(self, name: str) -> list[dict[str, Any]]:
        with self.app.state.sessions() as db:
            query = select(Event).where(Event.event == name).order_by(Event.id)
            return [row.data for row in db.scalars(query)]

    def spawner(self) -> SpawnerClient:
        with self.app.state.sessions() as db, db.begin():
            token = create_token(db, f"devbox-{uuid.uuid4().hex[:6]}", [REPO])
        client = SpawnerClient(self.app.url, token)
        assert client.register().status_code == 200
        return client


def bare_origin(root: Path, repo: str) -> Path:
    """`<root>/<repo>.git`: a bare repository with one commit on `main`."""
    work = root / f"{repo}-src"
    work.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README.md").write_text("hello\n")
    git("add", "README.md", cwd=work)
    git("commit", "-q", "-m", "init", cwd=work)
    bare = root / f"{repo}.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
    return bare


@pytest.fixture
def pull_config(request: pytest.FixtureRequest) -> str:
    """The operator config of the bed's App (`indirect` parametrization changes it)."""
    return str(getattr(request, "param", CONFIG))


@pytest.fixture
def pull_app(
    settings_env: dict[str, str],
    fake_slack: tuple[FakeSlack, str],
    pull_config: str,
    request: pytest.FixtureRequest,
) -> Iterator[RunningApp]:
    """The App with the Slack mirror on and this bed's operator config, as plain WSGI, or
    (`indirect` "asgi") as `the-loop serve` deploys it: gunicorn's asgi worker, whose front
    checks the git door and streams the bodies; or (`indirect` "gunicorn") as plain WSGI
    under gunicorn's stock threaded worker, with `GUNICORN_THREADS` threads."""
    from tests.slack_support import slack_env
    from tests.support import gunicorn_app, served_app, wsgi_app

    env = slack_env(settings_env, fake_slack[1], pull_config)
    front = getattr(request, "param", "")
    if front == "asgi":
        served = served_app(env)
    elif front == "gunicorn":
        served = gunicorn_app(env, GUNICORN_THREADS)
    else:
        served = wsgi_app(env)
    with served as app:
        yield app


@pytest.fixture
def bed(
    pull_app: RunningApp,
    fake_github: tuple[FakeGitHub, str],
    fake_slack: tuple[FakeSlack, str],
    tmp_path: Path,
) -> Iterator[Bed]:
    fake = fake_github[0]
    root = tmp_path / "git"
    bare_origin(root, REPO)
    fake.git_root = root
    fake.grant(REPO, "Codertocat", "write")
    server = GitHttp(root, accept=accept_minted(fake))
    with LiveServer(server) as live:
        yield Bed(pull_app, fake, fake_slack[0], server, live.url, tmp_path)


def label_and_execute(bed: Bed, execute: str = "the-loop execute") -> None:
    """The trigger label (the repository cloned from the git server), then an execute."""
    payload = labeled()
    payload["repository"] = {**payload["repository"], "clone_url": bed.clone_url()}
    bed.send("issues", payload)
    bed.send("issue_comment", comment(execute, cid=int(uuid.uuid4().int % 10**9)))


def session_base_env(tmp_path: Path) -> dict[str, str]:
    """What the spawner (and so every session) runs with: PYTHONPATH lets a session's git
    find this tree's credential helper."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # A devbox user who keeps git credentials on disk: the checkout must switch that off.
    (home / ".gitconfig").write_text("[credential]\n\thelper = store\n")
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(ROOT),
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def running(bed: Bed) -> SpawnerClient:
    """Label, execute, and a spawner's claim and report of a started session (no tmux): the
    item is running as far as the App knows. Returns the spawner's client."""
    label_and_execute(bed)
    spawner = bed.spawner()
    job = spawner.job(wait=5)
    assert job is not None and job["kind"] == "spawn"
    facts = {"session_id": "s-1", "tmux_target": "the-loop:x", "harness": "claude"}
    assert spawner.result(job["id"], ok=True, checkout="/w", respawned=False, **facts).is_success
    return spawner


@pytest.fixture
def session_runner(tmp_path: Path) -> Iterator[TmuxRunner]:
    """tmux for the sessions, on a socket of its own; killed at teardown."""
    tmux = TmuxRunner(
        f"the-loop-pulls-{uuid.uuid4().hex[:10]}",
        env=session_base_env(tmp_path),
        pass_env=TEST_PASS_ENV,
    )
    try:
        yield tmux
    finally:
        tmux.kill_server()


def spawner_context(
    bed: Bed, runner: TmuxRunner, standin: StandIn, args: list[str] | None = None
) -> SpawnerContext:
    harness = {"name": "claude", "default": True, "command": str(standin.path), "args": args}
    config = parse_config(
        {
            "harnesses": [harness],
            "routing": {"workspace": {"root": str(bed.tmp / "work")}, "sandbox": standin.sandbox},
        },
        "devbox.yaml",
    )
    state = bed.tmp / "devbox-state"  # not "spawner": its parent would count as the App's state dir
    return SpawnerContext(
        config=config,
        runner=runner,
        registry=Registry(state / "sessions.json"),
        events=SpawnerEvents(state),
        home=bed.tmp / "home",
        state_dir=state,
        app_url=bed.app.url,
        hosts=frozenset({"claude"}),
        env=session_base_env(bed.tmp),
        ready_timeout=0.5,
    )


def _clone_token(spawner: SpawnerClient, job_id: int) -> str | None:
    """The token the App mints for a clone of job `job_id`'s repository (None: no identity)."""
    answer = spawner.clone_token(job_id)
    assert answer.status_code == 200, answer.text
    token = answer.json().get("github_token")
    return token.get("token") if isinstance(token, dict) else None


def run_next_job(bed: Bed, spawner: SpawnerClient, ctx: SpawnerContext) -> dict[str, Any]:
    """Claim the next job over HTTP, run it with the spawner's own code, report the result."""
    raw = spawner.job(wait=5)
    assert raw is not None, "no job was offered"
    job = ClaimedJob.from_json(raw)
    ctx.ask_token = lambda job_id: _clone_token(spawner, job_id)  # as the agent's client asks
    ok, result, error = run_job(ctx, job)
    assert ok, error
    answer = spawner.result(job.id, ok=True, **result)
    assert answer.status_code == 200, answer.text
    return {"job": job, "result": result, "answer": answer.json()}


def session_env(standin: StandIn, item: str = ITEM, start: int = 1) -> dict[str, str]:
    """The environment the session process was started with (as the stand-in recorded it),
    plus a committer identity; what an agent's Bash tool would run commands with."""
    recorded = standin.wait_start(item, start)["env"]
    # Run as root, the tests stand in for a session whose checkout is the session user's
    # (see `confine/sessionuser.py`): their git must accept a repository another user owns.
    return {**recorded, **AUTHOR_ENV, "GIT_CONFIG_PARAMETERS": "'safe.directory=*'"}


def agent(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """A command the agent runs in its checkout (`the-loop …` runs this tree's CLI)."""
    words = [sys.executable, "-m", "app.cli", *argv[1:]] if argv[0] == "the-loop" else list(argv)
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def pr_payload(name: str, number: int, *, branch: str = BRANCH, sha: str = "") -> dict[str, Any]:
    """A published `pull_request.*` payload re-pointed at PR `number` from `branch`."""
    base = fixture_json(f"github/{name}") if name == "pull_request.opened.json" else data_json(name)
    payload = with_installation(copy.deepcopy(base))
    pr = payload["pull_request"]
    pr["number"] = payload["number"] = number
    pr["html_url"] = f"https://github.com/{REPO}/pull/{number}"
    pr["head"]["ref"] = branch
    if sha:
        pr["head"]["sha"] = sha
    return payload


@pytest.fixture
def live(bed: Bed, session_runner: TmuxRunner, standin: StandIn) -> SimpleNamespace:
    """A work item executed and its session started by the spawner's own code."""
    label_and_execute(bed)
    spawner = bed.spawner()
    ctx = spawner_context(bed, session_runner, standin)
    spawned = run_next_job(bed, spawner, ctx)
    checkout = Path(spawned["result"]["checkout"])
    return SimpleNamespace(
        bed=bed, spawner=spawner, ctx=ctx, env=session_env(standin), checkout=checkout
    )


def commit_and_push(live: SimpleNamespace, name: str = "fix.txt") -> str:
    (live.checkout / name).write_text("fixed\n")
    for argv in (("git", "add", name), ("git", "commit", "-q", "-m", f"add {name}")):
        done = agent(live.env, live.checkout, *argv)
        assert done.returncode == 0, done.stderr
    pushed = agent(live.env, live.checkout, "git", "push")
    assert pushed.returncode == 0, pushed.stderr
    return agent(live.env, live.checkout, "git", "rev-parse", "HEAD").stdout.strip()


STRAIGHT_TO_CODE = (
    "the-loop execute\n- [ ] requirements-definition\n- [ ] design\n- [ ] test-planning\n"
    "- [ ] tasks-breakdown\n"
)


@pytest.fixture
def pull_devbox(bed: Bed, model: FakeAnthropic, tmp_path: Path) -> Iterator[SpawnerContext]:
    """The spawner's agent loop on this machine; its sessions run the real claude against
    the scripted model, with this tree's `the-loop` on PATH and a committer identity."""
    home = scripted_home(tmp_path, stop_gate=False)
    env = scripted_env(model.url, home, GIT_CONFIG_NOSYSTEM="1", **AUTHOR_ENV)
    config = parse_config(
        {
            "harnesses": [
                {
                    "name": "claude",
                    "default": True,
                    "command": claude_binary(),
                    "args": ["--dangerously-skip-permissions"],
                }
            ],
            "routing": {"workspace": {"root": str(tmp_path / "work")}},
        }
    )
    registered = lambda: bed.events("spawner.registered")  # noqa: E731
    engine = bed.app.state.engine
    with running_devbox(bed.app.url, engine, REPO, config, home, env, registered) as ctx:
        yield ctx
