"""What every job of a spawner is given: its config, tmux, registry, events, home and state
directory, the App's URL, the harnesses it hosts, the model gateway, the host's side of
sessions' networks, credential routes and limits. Built once by the agent (or a test) and
handed to the launch steps, the closing steps and the watches alike; it holds values and
the spawner's shared marks, and does nothing itself."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from app.config import OperatorConfig
from app.gateway import ModelAccess
from app.spawner.confine.cgroups import SessionLimiter
from app.spawner.eventqueue import SpawnerEvents
from app.spawner.locks import ItemLocks
from app.spawner.network.credroutes import CredentialRoutes
from app.spawner.network.netgates import SessionNetworks
from app.spawner.registry import Registry
from app.spawner.session.tmux import TmuxRunner


@dataclass
class DiskMarks:
    """The sessions stopped past their disk bound (work item → bytes seen), until their
    end is reported."""

    _over: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def mark(self, work_item_id: str, used: int) -> None:
        with self._lock:
            self._over[work_item_id] = used

    def take(self, work_item_id: str) -> int | None:
        with self._lock:
            return self._over.pop(work_item_id, None)


@dataclass
class SpawnerContext:
    """Everything a job needs, built once by the agent (or a test)."""

    config: OperatorConfig
    runner: TmuxRunner
    registry: Registry
    events: SpawnerEvents
    home: Path
    state_dir: Path
    app_url: str
    hosts: frozenset[str]
    refused: frozenset[str] = frozenset()
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    locks: ItemLocks = field(default_factory=ItemLocks)
    ready_timeout: float = 30.0  # how long a launch waits for the input box
    # The model gateway sessions reach the model through (None: a shared login, directly).
    models: ModelAccess | None = None
    # How long a budget stop waits for the session to meet the gateway's refusal.
    budget_grace: float = 30.0
    # The host's side of sessions' closed networks (made on first use).
    networks: SessionNetworks | None = None
    # `routing.sandbox.routes`, resolved at the spawner's start (None: none configured).
    routes: CredentialRoutes | None = None
    limiter: SessionLimiter | None = None  # sessions' bounds (made on first use: the host's)
    # Orders the first use of `networks` and `limiter` between jobs (each made once).
    first_use: threading.Lock = field(default_factory=threading.Lock)
    disk: DiskMarks = field(default_factory=DiskMarks)  # sessions stopped past their disk bound
    # Asks the App for a job's clone token, by job id (None: no App to ask; clones go without).
    ask_token: Callable[[int], str | None] | None = None

    @property
    def workspace_root(self) -> Path:
        return self.config.routing.workspace.resolved_root
