"""The older daemon's config shapes: an operator's `cli-config.yaml` loads, what the App does
not read is reported once as ignored (never an error), and `the-loop config check` says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from app.config.operator_config import ConfigError, config_findings, load_config, parse_config
from app.config.process_settings import load_settings
from app.gate.checklist import build_checklist, build_offer
from app.gate.parse import parse_rows
from app.gate.render import render_checklist
from app.runtime.app_state import build_state
from app.store.tables import Event

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "data" / "older-daemon-cli-config.yaml"
IGNORED = {
    "routing.authorizedUsers[hubot].name",
    "routing.control.keywords.stop",
    "routing.pollIntervalSeconds",
    "daemon",
}


def test_the_older_daemons_example_loads_as_written():
    config = load_config(EXAMPLE)
    assert [m.name for m in config.models] == ["opus", "sonnet", "haiku"]
    assert config.model("sonnet").about == "Faster, cheaper; good for small fixes"  # type: ignore[union-attr]
    assert config.model("sonnet").harnesses == ["claude"]  # type: ignore[union-attr]
    assert [e.name for e in config.effort] == ["low", "medium", "high", "xhigh", "max"]
    assert config.routing.authorized_users == ["octocat", "hubot"]
    assert config.slack.users == {"U0G9QF9C6": "monalisa", "U024BE7LH": "hubot"}
    assert config.routing.trigger.execute_keyword == "/loop go"
    assert config.routing.auto_execute_labels == ["the-loop: auto-execute", "ready"]
    assert {f.key for f in config.ignored} == IGNORED
    assert len(config.ignored) == len(IGNORED)
    assert config_findings(config) == []


def test_about_is_shown_on_the_model_row_and_stays_on_one_line():
    config = load_config(EXAMPLE)
    offer = build_offer(config, {"claude"})
    body = render_checklist(build_checklist(offer, "/loop go"), "github:o/r#1")
    assert "- [ ] `model-sonnet` — Faster, cheaper; good for small fixes" in body
    assert "- [ ] `model-haiku` — Quickest; for chores" in body
    assert "- [ ] `model-opus`\n" in body
    efforts = [t.token for t in parse_rows(body) if t.token.startswith("effort-")]
    assert efforts == ["effort-low", "effort-medium", "effort-high", "effort-xhigh", "effort-max"]
    mirrored = build_checklist(offer, "/loop go").to_mirror()
    labels = [r["label"] for s in mirrored["sections"] for r in s["rows"]]
    assert "sonnet — Faster, cheaper; good for small fixes" in labels


def test_effort_enum_order_wins_and_unknown_levels_follow_in_declared_order():
    config = parse_config({"effort": ["turbo", "max", {"name": "low", "args": ["--x"]}, "high"]})
    assert [e.name for e in config.effort] == ["low", "high", "max", "turbo"]
    assert config.effort_level("low").args == ["--x"]  # type: ignore[union-attr]


def test_conflicting_spellings_are_reported_and_the_apps_own_key_wins():
    config = parse_config(
        {
            "routing": {
                "trigger": {"executeKeyword": "the-loop execute"},
                "control": {"keywords": {"execute": "/go"}},
                "authorizedUsers": [{"github": "hubot", "slack": "U1"}],
            },
            "slack": {"users": {"U1": "octocat"}},
        }
    )
    assert config.routing.trigger.execute_keyword == "the-loop execute"
    assert config.slack.users == {"U1": "octocat"}
    assert {f.key for f in config_findings(config)} == {
        "routing.control.keywords.execute",
        "routing.authorizedUsers[hubot].slack",
    }


def test_a_person_without_a_login_is_a_clear_error(tmp_path):
    path = tmp_path / "cli-config.yaml"
    path.write_text("routing:\n  authorizedUsers:\n    - {slack: U1, name: Nobody}\n")
    with pytest.raises(ConfigError, match=r"authorizedUsers\[0\]: an entry needs a `github` login"):
        load_config(path)


def test_the_app_reports_each_ignored_key_once_at_load(settings_env):
    settings_env["THE_LOOP_CONFIG"] = str(EXAMPLE)
    state = build_state(load_settings(settings_env, dotenv=None))
    try:
        with state.sessions() as session:
            rows = session.scalars(select(Event).where(Event.event == "config.ignored")).all()
        keys = [row.data["key"] for row in rows]
    finally:
        state.close()
    assert sorted(keys) == sorted(IGNORED)


def _config_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "config", "check", *args],
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_config_check_prints_understood_adapted_and_ignored():
    done = _config_check(str(EXAMPLE))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "models[sonnet]" in out and "Faster, cheaper" in out
    assert "rows in this order: low, medium, high, xhigh, max" in out
    assert "U024BE7LH → @hubot" in out
    assert "Read from an older shape (5)" in out
    assert "Ignored (4)" in out
    for key in IGNORED:
        assert sum(line.split(" ", 1)[0] == key for line in out.splitlines()) == 1, key
    assert "a display name" in out and "Conflicts: none" in out


def test_config_check_names_the_bad_key_and_exits_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [{name: '--model=evil'}]\n")
    done = _config_check(str(bad))
    assert done.returncode == 2
    assert "models[0].name" in done.stderr
    assert _config_check(str(tmp_path / "absent.yaml")).returncode == 2
