"""A devbox for tests of the whole loop: the spawner's own agent loop on this machine, its
sessions running the real `claude` against the scripted model (tests/fakes/anthropic.py)
through the spawner's model gateway, as `the-loop spawner` runs them, or a stand-in harness;
and the deliveries that label an issue and execute it."""

from __future__ import annotations

import copy
import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.config.operator_config import OperatorConfig, parse_config
from app.fleet.tokens import create_token
from app.spawner.agent import Agent, AgentOptions
from app.spawner.appclient import AppClient
from app.spawner.context import SpawnerContext
from app.spawner.harness.claude_trust import claude_config_path, update_json_file
from hooks.gate_entry import direct_command
from tests.claude_support import (
    DUMMY_KEY,
    approve_key,
    claude_binary,
    claude_env,
    install_stop_command,
)
from tests.fakes.anthropic import FakeAnthropic
from tests.gate_support import REPO, comment, deliver, labeled
from tests.spawner_support import gateway_context
from tests.support import wait_for

ROOT = Path(__file__).resolve().parents[1]


def standin_yaml(standin: Any, work: Path, *routing: str) -> str:
    """The operator config of a devbox whose one harness is `standin` (spawner_support's
    StandIn), in a sandbox that shows it; `routing` adds lines under `routing:`."""
    extra = "".join(f"  {line}\n" for line in routing)
    return (
        f"harnesses:\n  - {{name: claude, default: true, command: {standin.path}}}\n"
        f"routing:\n  workspace: {{root: {work}}}\n  sandbox: {standin.sandbox!r}\n{extra}"
    )


def scripted_home(tmp_path: Path, *, stop_gate: bool = True) -> Path:
    """The devbox user's home: the dummy API key approved, the product's stop gate installed."""
    home = tmp_path / "devbox-home"
    home.mkdir()
    update_json_file(claude_config_path(home), lambda data: approve_key(data, DUMMY_KEY))
    if stop_gate:
        install_stop_command(home, direct_command())
    return home


def scripted_env(model_url: str, home: Path, **extra: str) -> dict[str, str]:
    """The spawner's environment: claude pointed at the scripted model, this tree's `the-loop`."""
    return {
        **claude_env(model_url, home),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        **extra,
    }


@contextmanager
def running_devbox(
    app_url: str,
    engine: Engine,
    repo: str,
    config: OperatorConfig,
    home: Path,
    env: Mapping[str, str],
    registered: Callable[[], Any],
    *,
    size: tuple[int, int] = (160, 50),
    transcript_interval: float = 60.0,
    hosts: frozenset[str] = frozenset({"claude"}),
) -> Iterator[SpawnerContext]:
    """The agent loop (claims, watchdog every second) against the App at `app_url`, with a
    spawner token for `repo`; yields once `registered()` says the App saw it register."""
    with Session(engine) as session, session.begin():
        token = create_token(session, "devbox", [repo])
    client = AppClient(app_url, token)
    state = home.parent / "devbox-state"
    ctx = gateway_context(
        config,
        env,
        home,
        state,
        tmux="the-loop-devbox",
        size=size,
        hosts=hosts,
        app_url=app_url,
        client=client,
    )
    options = AgentOptions(
        name="devbox", wait=2, watchdog_interval=1, transcript_interval=transcript_interval
    )
    agent = Agent(ctx, client, options)
    thread = threading.Thread(target=agent.run)
    thread.start()
    try:
        wait_for(registered, timeout=30)
        yield ctx
    finally:
        agent.stop.set()
        thread.join(timeout=30)
        if ctx.models is not None:
            ctx.models.close()
        client.close()
        ctx.runner.kill_server()


STANDIN_MODEL_KEY = "sk-ant-api03-a-stand-in-devbox-model-key-0000"


@contextmanager
def serve_devbox(
    app: Any,
    operator_yaml: str,
    home: Path,
    *,
    transcript_interval: float = 60.0,
    model_key: str | None = STANDIN_MODEL_KEY,
) -> Iterator[SpawnerContext]:
    """`running_devbox` for the fixture repository of a running App, configured by
    `operator_yaml` (a stand-in harness, usually), with a plain environment holding the
    operator's model key (`model_key`; None: a devbox given no credential)."""
    config = parse_config(yaml.safe_load(operator_yaml))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    if model_key is not None:
        env["ANTHROPIC_API_KEY"] = model_key
    registered = lambda: app.events("spawner.registered")  # noqa: E731
    with running_devbox(
        app.url,
        app.state.engine,
        REPO,
        config,
        home,
        env,
        registered,
        transcript_interval=transcript_interval,
    ) as ctx:
        yield ctx


def issue_payloads(number: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The published `issues.labeled` payload and an `issue_comment` template, moved to
    issue `number` of `REPO` (the fixtures are of issue 1)."""
    label = copy.deepcopy(labeled())
    said = comment("")
    for payload in (label, said):
        issue = payload["issue"]
        for key in ("url", "html_url", "comments_url", "events_url", "labels_url"):
            issue[key] = str(issue[key]).replace("/issues/1", f"/issues/{number}")
        issue["number"] = number
        issue["id"] = int(issue["id"]) + number - 1
    return label, said


def release(app: Any, fake: Any, origin: Path, reply: str, number: int = 1) -> None:
    """Label issue `number` (its repository cloned from `origin`), then answer the gate."""
    fake.grant(REPO, "Codertocat", "write")
    label, said = issue_payloads(number)
    label["repository"]["clone_url"] = str(origin)
    deliver(app, "issues", label, f"label-{number}")
    said["comment"].update(body=reply, id=492700400 + number - 1)
    deliver(app, "issue_comment", said, f"exec-{number}")


@pytest.fixture
def standin_devbox(
    request: pytest.FixtureRequest, running_app: Any, operator_yaml: str, home: Path
) -> Iterator[SpawnerContext]:
    """The spawner's agent loop serving `running_app` with this module's operator config
    (a stand-in harness, usually); the module's `STANDIN_DEVBOX` holds `serve_devbox`'s
    keyword arguments, if any."""
    options = getattr(request.module, "STANDIN_DEVBOX", {})
    with serve_devbox(running_app, operator_yaml, home, **options) as ctx:
        yield ctx


def claude_operator_yaml(tmp_path: Path) -> str:
    """An operator config whose one harness is the real `claude` (permissions skipped, as
    the sandbox makes safe), with its workspace under `tmp_path`: a module's
    `OPERATOR_YAML` for `claude_devbox`."""
    return yaml.safe_dump(
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


def write_doc(folder: str, title: str, name: str) -> str:
    """The shell command a scripted model runs to write an artifact that counts (a heading
    and a paragraph) as `folder/name`."""
    text = f"# {title}\\n\\n{title} written down in a paragraph of plain words.\\n"
    return f"printf '{text}' > {folder}/{name}"


@pytest.fixture
def claude_devbox(
    running_app: Any, operator_yaml: str, model: FakeAnthropic, tmp_path: Path
) -> Iterator[SpawnerContext]:
    """A spawner on this machine whose sessions run the real claude against the fake model,
    with the product's stop gate installed in the devbox user's Claude Code settings."""
    home = scripted_home(tmp_path)
    config = parse_config(yaml.safe_load(operator_yaml))
    registered = lambda: running_app.events("spawner.registered")  # noqa: E731
    engine = running_app.state.engine
    env = scripted_env(model.url, home)
    with running_devbox(running_app.url, engine, REPO, config, home, env, registered) as ctx:
        yield ctx
