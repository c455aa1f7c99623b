"""One module per harness: how each agent CLI is launched and driven in tmux.

An adapter says its launch head (what follows the executable: a session id, or how to
resume), its effort fragment, how the session's home is prepared (trust, the stop hook, the
model gateway's URL and pass), which screens it can show and how they read, how long a paste
waits before its Enter, and where its transcript lies. `app.config.ADAPTER_MODULES` is the
table of harness name → adapter module (the App reads its names only); `adapter_of`
loads a module from it. A third harness is one new module here and one row in that table.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol

from app.config import ADAPTER_MODULES, DEFAULT_HARNESS, HarnessTrust
from app.gateway import SessionModel
from app.spawner.harness.screens import ScreenReader


@dataclass(frozen=True)
class HomeSetup:
    """What preparing a session's home needs to know."""

    real_home: Path  # the operator's (the spawner's) home
    own_home: Path  # the session's own home under the spawner's state directory
    sandboxed: bool  # False: the session runs unconfined, as the operator
    checkout: Path
    workspace_root: Path
    env: Mapping[str, str]
    trust: HarnessTrust
    launch_args: Sequence[str]
    model: SessionModel | None
    share_login: bool


@dataclass
class TrustOutcome:
    """What an adapter's trust pre-seed did, for the launch to report as events."""

    directories: list[str] = field(default_factory=list)
    written: bool = False
    bypass_accepted: bool = False
    warnings: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


@dataclass
class HomeReady:
    """What preparing did: the home the session runs with, the trust written, failures."""

    home: Path
    trust: TrustOutcome | None = None
    failures: list[str] = field(default_factory=list)


class HarnessAdapter(Protocol):
    name: str
    wire: str  # the model gateway's API it speaks: "messages" or "responses"
    deny: tuple[str, ...]  # arguments that take interactive question tools away
    screens: ScreenReader
    own_home_unconfined: bool  # its home is its own even when sessions run unconfined
    enter_after: float  # seconds a paste must settle before its Enter
    enter_when_shown: bool  # whether the Enter waits until the box shows the paste
    # What its environment gains in a network of its own: the traffic of its own that could
    # not get out there (updates, telemetry) switched off rather than refused at the proxy.
    closed_network_env: Mapping[str, str]
    # Hosts the harness itself knocks on (its telemetry, its updates) should anything still
    # try: refused as any other, but never announced on the issue as the work's need.
    own_hosts: tuple[str, ...]

    def launch_head(self, session_id: str, resume: bool) -> tuple[str, ...]: ...

    def effort_fragment(self, level: str) -> tuple[str, ...]: ...

    def probe(self, prompt: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(before, after) the operator's arguments and the fragment, for a one-shot run
        that answers `prompt` and exits (`the-loop models check`)."""
        ...

    def prepare_home(self, setup: HomeSetup) -> HomeReady: ...

    def session_env(
        self, model: SessionModel | None, home: Path
    ) -> tuple[dict[str, str], dict[str, str]]: ...

    def transcript(self, home: Path, session_id: str) -> Path | None: ...

    managed_at: Path  # where the harness reads settings no user or project setting overrides

    def write_managed(self, state_dir: Path) -> Path:
        """The directory (the spawner's, under `state_dir`) a sandboxed session sees
        read-only at `managed_at`, holding the stop gate's hook; raises ValueError or OSError
        when the host's own managed settings cannot be read or carried."""
        ...


@cache
def adapter_of(name: str) -> HarnessAdapter:
    """The adapter of harness `name`; an unknown name is the default harness's (a choice is
    re-validated before it reaches here, so only a caller's slip lands there)."""
    module = ADAPTER_MODULES.get(name) or ADAPTER_MODULES[DEFAULT_HARNESS]
    adapter: HarnessAdapter = importlib.import_module(module).ADAPTER
    return adapter


def screens_of(name: str) -> ScreenReader:
    return adapter_of(name).screens
