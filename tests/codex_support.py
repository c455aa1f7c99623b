"""The real `codex` binary under test: where it is, and the spawner environment that points
the model gateway's Responses upstream at the scripted model (tests/fakes/responses_api.py).

Codex reads no base URL from its environment (`OPENAI_BASE_URL` is ignored): the session's
`config.toml`, written by the spawner's Codex adapter, names the model gateway as its
provider; the spawner's own `OPENAI_BASE_URL` / `OPENAI_API_KEY` say where the gateway
forwards and with which key, as they would on a devbox.
"""

from __future__ import annotations

import os
import shutil

import pytest

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
