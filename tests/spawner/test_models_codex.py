"""`the-loop models check` on Codex: the real `codex exec` probe, run with the operator's own
Codex config (a provider speaking the Responses API, here the scripted one), says `ok` for a
model the API serves and `refused` for one it does not know."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.config.operator_config import parse_config
from app.spawner.probes import Verdict, VerdictCache, check, plan_probes
from tests.codex_support import codex_binary
from tests.fakes.responses_api import FakeResponses, Reply, Step, anything

pytestmark = pytest.mark.claude  # a real harness binary


def test_codex_models_are_probed_through_the_responses_api(tmp_path: Path) -> None:
    binary = codex_binary()
    config = parse_config(
        {
            "harnesses": [
                {"name": "claude", "default": True},
                {"name": "codex", "command": binary},
            ],
            "models": [
                {"name": "served", "id": "scripted-served", "harnesses": ["codex"]},
                {"name": "gone", "id": "scripted-gone", "harnesses": ["codex"]},
            ],
        }
    )
    with FakeResponses([Step(anything, Reply("OK"))], unknown_models={"scripted-gone"}) as api:
        home = tmp_path / "operator"
        (home / ".codex").mkdir(parents=True)
        (home / ".codex" / "config.toml").write_text(
            'model_provider = "scripted"\n'
            "[model_providers.scripted]\n"
            f'name = "scripted"\nbase_url = "{api.base_url}"\n'
            'wire_api = "responses"\nenv_key = "SCRIPTED_KEY"\nrequest_max_retries = 0\n'
            "stream_max_retries = 0\n"
        )
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "CODEX_HOME": str(home / ".codex"),
            "SCRIPTED_KEY": "sk-scripted",
        }
        probes = plan_probes(config, ["codex"])
        results = check(probes, VerdictCache(tmp_path / "cache.json"), env, timeout=120)
    verdicts = {r.probe.token: r.verdict for r in results}
    assert verdicts == {"model-served": Verdict.OK, "model-gone": Verdict.REFUSED}, results
    assert {r.body.get("model") for r in api.snapshot()} >= {"scripted-served", "scripted-gone"}
    assert all(r.probe.argv[1] == "exec" for r in results)
