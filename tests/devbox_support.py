"""A devbox for tests of the whole loop: the spawner's own agent loop on this machine, its
sessions running the real `claude` against the scripted model (tests/fakes/anthropic.py)
through the spawner's model gateway, as `the-loop spawner` runs them."""

from __future__ import annotations

import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.commands.hooks import direct_command
from app.config import OperatorConfig
from app.fleet.tokens import create_token
from app.gateway.access import open_model_access, without_credentials
from app.spawner.agent import Agent, AgentOptions
from app.spawner.appclient import AppClient
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.launch import SpawnerContext
from app.spawner.registry import Registry
from app.spawner.tmux import TmuxRunner
from app.spawner.trust import claude_config_path, update_json_file
from tests.claude_support import DUMMY_KEY, approve_key, claude_env, install_stop_command
from tests.support import wait_for

ROOT = Path(__file__).resolve().parents[1]


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
) -> Iterator[SpawnerContext]:
    """The agent loop (claims, watchdog every second) against the App at `app_url`, with a
    spawner token for `repo`; yields once `registered()` says the App saw it register."""
    with Session(engine) as session, session.begin():
        token = create_token(session, "devbox", [repo])
    client = AppClient(app_url, token)
    state = home.parent / "devbox-state"
    runner = TmuxRunner(f"the-loop-devbox-{uuid.uuid4().hex[:8]}", env=dict(env), size=size)
    events = SpawnerEvents(state, client)
    ctx = SpawnerContext(
        config=config,
        runner=runner,
        registry=Registry(state / "sessions.json"),
        events=events,
        home=home,
        state_dir=state,
        app_url=app_url,
        hosts=frozenset({"claude"}),
        env=without_credentials(env),  # as `the-loop spawner` keeps it: the key read once
        models=open_model_access(config, env, events.emit),
    )
    agent = Agent(ctx, client, AgentOptions(name="devbox", wait=2, watchdog_interval=1))
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
        runner.kill_server()
