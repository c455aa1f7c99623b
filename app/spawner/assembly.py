"""Building a spawner from settings: its state directory, tmux runner, registry, event
outbox and the verdicts it trusts. Shared by `the-loop spawner`, `sessions`, `models` and
`standing`, so every command sees the same registry and the same cache."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from app.config import OperatorConfig, Settings, config_findings
from app.files import private_dir
from app.spawner.agent import hostable_harnesses
from app.spawner.appclient import AppClient
from app.spawner.context import SpawnerContext
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.probes import VerdictCache, plan_probes, refused_tokens
from app.spawner.registry import Registry
from app.spawner.session.tmux import DEFAULT_SOCKET, TmuxRunner


def spawner_state_dir(settings: Settings) -> Path:
    """`<state dir>/spawner`: apart from the App's own files when both run on one machine."""
    return settings.state_dir / "spawner"


def registry_for(settings: Settings) -> Registry:
    return Registry(spawner_state_dir(settings) / "sessions.json")


def verdict_cache(settings: Settings) -> VerdictCache:
    return VerdictCache(spawner_state_dir(settings) / "models-cache.json")


def build_context(
    settings: Settings,
    config: OperatorConfig,
    *,
    client: AppClient | None,
    socket: str = DEFAULT_SOCKET,
    env: Mapping[str, str] | None = None,
) -> SpawnerContext:
    """A spawner context; the config's conflicts are reported once, here, not per spawn."""
    env = dict(os.environ if env is None else env)
    private_dir(settings.state_dir)
    state_dir = private_dir(spawner_state_dir(settings))
    events = SpawnerEvents(state_dir, client)
    for finding in config_findings(config):
        events.emit(
            "config.conflict",
            None,
            level="warning",
            key=finding.key,
            message=finding.message,
            file=config.source,
        )
    hosts = frozenset(hostable_harnesses(config, env))
    probes = plan_probes(config, hosts)
    return SpawnerContext(
        config=config,
        runner=TmuxRunner(socket, env=env, pass_env=config.routing.sandbox.env.pass_env),
        registry=registry_for(settings),
        events=events,
        home=Path(env.get("HOME") or Path.home()),
        state_dir=state_dir,
        app_url=settings.the_loop_url,
        hosts=hosts,
        refused=refused_tokens(probes, verdict_cache(settings)),
        env=env,
        ask_token=client.job_token if client is not None else None,
    )
