"""The claim loop against the real App (its spawner API on a real port, a fake GitHub behind
it): jobs in, sessions started, results and events back; the App going away and coming back."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

from app.audit import read_jsonl
from app.config.operator_config import parse_config
from app.spawner.agent import Agent, AgentOptions
from app.spawner.appclient import AppClient
from app.spawner.context import SpawnerContext
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.harness.claude import DENY_TOKEN
from app.spawner.registry import Registry
from app.spawner.session.tmux import TmuxRunner
from app.store.tables import JobKind, WorkItemStatus
from tests.spawner_support import StandIn, bare_repository
from tests.spawnerapi_support import Api
from tests.support import free_port, wait_for

pytestmark = pytest.mark.sqlite_only

FLAG = "--dangerously-skip-permissions"


SHARED_API = {"lease_seconds": 30}  # how serve_api runs this module's App


class Server:
    """The App served on a port that stays the same across a stop and a start (a restart)."""

    def __init__(self, flask_app: Any) -> None:
        self.app = flask_app
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: Any = None

    def start(self) -> None:
        self._server = make_server("127.0.0.1", self.port, self.app, threaded=True)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Devbox:
    def __init__(
        self,
        api: Api,
        url: str,
        tmp_path: Path,
        runner: TmuxRunner,
        standin: StandIn,
        home: Path,
        token: str | None = None,
    ) -> None:
        self.api, self.standin = api, standin
        self.origin = bare_repository(tmp_path)
        config = parse_config(
            {
                "harnesses": [{"name": "claude", "command": str(standin.path), "args": [FLAG]}],
                "models": [{"name": "opus"}],
                "routing": {
                    "workspace": {"root": str(tmp_path / "work")},
                    "sandbox": standin.sandbox,
                },
            }
        )
        self.client = AppClient(url, token or api.token())
        state = tmp_path / "state"
        self.ctx = SpawnerContext(
            config=config,
            runner=runner,
            registry=Registry(state / "sessions.json"),
            events=SpawnerEvents(state, self.client),
            home=home,
            state_dir=state,
            app_url=url,
            hosts=frozenset({"claude"}),
            env={"PATH": os.environ["PATH"], "HOME": str(home)},
        )
        options = AgentOptions(name="devbox", wait=1, watchdog_interval=0.3, max_backoff=0.5)
        self.agent = Agent(self.ctx, self.client, options)
        self.code: list[int] = []
        self.thread = threading.Thread(target=lambda: self.code.append(self.agent.run()))

    def __enter__(self) -> Devbox:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.agent.stop.set()
        self.thread.join(timeout=30)
        self.client.close()

    def spawn(self, number: int = 1, model: str = "opus") -> tuple[str, int]:
        item = self.api.work_item(number)
        frozen = {
            "decisions": {},
            "skips": {},
            "harness": "claude",
            "model": model,
            "effort": "",
            "dropped": [],
        }
        job = self.api.queue(
            JobKind.SPAWN,
            f"spawn-{number}",
            item,
            spec_id=f"issue-{number}",
            repo=self.api.repo,
            issue_number=number,
            installation_id=1,
            clone_url=str(self.origin),
            frozen=frozen,
            gh_event="issue_comment",
            action="created",
            prompt=f"Work on issue {number}",
        )
        return item, job

    def local_events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in read_jsonl(self.ctx.events.path) if e["event"] == name]


MakeDevbox = Callable[..., "Devbox"]


@pytest.fixture
def make_devbox(
    api: Api, tmp_path: Path, runner: TmuxRunner, standin: StandIn, home: Path
) -> MakeDevbox:
    def make(url: str | None = None, token: str | None = None) -> Devbox:
        return Devbox(api, url or api.url, tmp_path, runner, standin, home, token)

    return make


def test_a_queued_spawn_becomes_a_running_session_the_app_knows_about(
    api: Api, make_devbox: MakeDevbox
) -> None:
    with make_devbox() as box:
        item, job = box.spawn()
        start = box.standin.wait_start(item)
        wait_for(lambda: api.item(item).state == WorkItemStatus.RUNNING and api.item(item).session)
    assert start["argv"][3:] == [FLAG, "--model", "opus", DENY_TOKEN]
    wait_for(lambda: b"Work on issue 1" in box.standin.stdin(item))
    session = api.item(item).session
    assert session is not None and session["session_id"] == start["argv"][2]
    assert session["harness_args"] == [FLAG, "--model", "opus"]
    assert api.job(job).state == "done"
    assert start["env"]["THE_LOOP_SESSION_TOKEN"].startswith("tlss_")
    spawned = wait_for(lambda: api.events("session.spawned", item))
    assert spawned[0]["harness_args"] == [FLAG, "--model", "opus"]
    assert spawned[0]["gh_event"] == "issue_comment"
    assert api.events("spawner.registered")[-1]["harnesses"] == ["claude"]


def test_a_followup_is_delivered_and_receipted_and_stop_ends_it(
    api: Api, make_devbox: MakeDevbox
) -> None:
    with make_devbox() as box:
        item, _ = box.spawn()
        box.standin.wait_start(item)
        wait_for(lambda: api.item(item).state == WorkItemStatus.RUNNING)
        api.queue(
            JobKind.DELIVER,
            "d1",
            item,
            spec_id="issue-1",
            repo=api.repo,
            issue_number=1,
            clone_url=str(box.origin),
            comment_id=4242,
            body="also the empty case",
            author="octocat",
            source="github",
            ref="4242",
        )
        wait_for(lambda: b"also the empty case" in box.standin.stdin(item))
        wait_for(lambda: any(r["target_id"] == 4242 for r in api.fake.reactions))
        api.queue(JobKind.STOP, "s1", item, reason="issue closed")
        wait_for(lambda: api.item(item).state == WorkItemStatus.STOPPED)
        record = box.ctx.registry.get(item)
        assert record is not None and record.state == "stopped"
        assert not box.ctx.runner.exists(record.tmux_session)


def test_the_agent_rides_out_an_app_restart_without_losing_events(
    api: Api, make_devbox: MakeDevbox
) -> None:
    server = Server(api.flask)
    server.start()
    with make_devbox(url=server.url) as box:
        item, job = box.spawn()
        box.standin.wait_start(item)
        wait_for(lambda: api.events("session.spawned", item))
        wait_for(lambda: api.job(job).state == "done")  # the spawn's result is in
        server.stop()  # the App goes away ...
        box.ctx.runner.kill(box.ctx.registry.get(item).tmux_session, owner=item)  # type: ignore[union-attr]
        wait_for(lambda: box.local_events("session.exited"))  # ... seen while it is away
        assert api.events("session.exited", item) == []
        assert box.ctx.events.unsent() >= 1
        server.start()  # ... and comes back on the same address
        wait_for(lambda: api.events("session.exited", item), timeout=15)
        wait_for(lambda: api.item(item).state == WorkItemStatus.EXITED)
        second, _ = box.spawn(2)  # and jobs flow again
        box.standin.wait_start(second)
        assert box.ctx.events.unsent() == 0 or wait_for(lambda: box.ctx.events.unsent() == 0)
    server.stop()
    assert len(api.events("session.exited", item)) == 1


def test_a_rejected_token_stops_the_agent(api: Api, make_devbox: MakeDevbox) -> None:
    with make_devbox(token="tlsp_not-a-real-token") as box:
        box.thread.join(timeout=15)
        assert box.code == [2]
