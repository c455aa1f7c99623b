"""The real `codex` binary under test: where it is, and the spawner environment that points
the model gateway's Responses upstream at the scripted model (tests/fakes/responses_api.py).

Codex reads no base URL from its environment (`OPENAI_BASE_URL` is ignored): the session's
`config.toml`, written by the spawner's Codex adapter, names the model gateway as its
provider; the spawner's own `OPENAI_BASE_URL` / `OPENAI_API_KEY` say where the gateway
forwards and with which key, as they would on a devbox. `sandboxed_codex_devbox` is a spawner context whose Codex
sessions run in its sandbox against a scripted model.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from app.config import parse_config
from app.spawner.launch import SpawnerContext
from tests.fakes.responses_api import FakeResponses
from tests.spawner_support import gateway_context

DUMMY_OPENAI_KEY = "sk-proj-scripted-model-dummy-key-000000"


def codex_binary() -> str:
    """`$THE_LOOP_CODEX` or `codex` on PATH; a skip where there is none, a failure in CI."""
    found = shutil.which(os.environ.get("THE_LOOP_CODEX") or "codex")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must install the codex binary: its tests never skip there")
        pytest.skip("codex is not installed")
    return found


def codex_upstream_env(base_url: str) -> dict[str, str]:
    """The spawner's settings for the Responses upstream: the scripted model, a dummy key."""
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": DUMMY_OPENAI_KEY}


def sandboxed_codex_devbox(tmp_path: Path, model: FakeResponses, **settings: Any) -> SpawnerContext:
    """A spawner context whose Codex sessions run the real `codex` in bubblewrap against
    `model`, through the spawner's model gateway (the operator's own Codex config names the
    scripted model); `settings` are top-level keys of the operator's config."""
    home = tmp_path / "devbox-home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "scripted-model"\n')
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(home),
        "GIT_CONFIG_NOSYSTEM": "1",
        **codex_upstream_env(model.base_url),
    }
    config = parse_config(
        {
            "harnesses": [
                {"name": "claude", "default": True},
                {"name": "codex", "command": codex_binary()},
            ],
            "routing": {
                "workspace": {"root": str(tmp_path / "work")},
                "sandbox": {"mode": "bubblewrap"},
            },
            **settings,
        }
    )
    hosts = frozenset({"claude", "codex"})
    return gateway_context(
        config, env, home, tmp_path / "state", tmux="the-loop-cx", hosts=hosts, ready_timeout=90.0
    )
