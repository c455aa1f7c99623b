"""What is in force for money, reach, isolation and approval, and where each value came from:
the one table (`app.config.in_force`) as `config check` and `doctor` print it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.config.in_force import DEFAULT, ENVIRONMENT, FILE, in_force
from app.config.operator_config import OperatorConfig, parse_config
from tests.support import free_port

ROOT = Path(__file__).resolve().parents[2]
BUDGET_AND_MEMORY = """
harnesses: [{name: claude, default: true, args: [--dangerously-skip-permissions]}]
routing:
  budget: {tokens: 100000}
  gates: {approveAfter: [design]}
  sandbox:
    egress: [example.org:443]
    limits: {memory: 1GiB}
"""


def the_loop(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=env["HOME"],
        env={**env, "COLUMNS": "200", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def rows_of(out: str) -> dict[str, tuple[str, str]]:
    """The In force table's rows as printed: setting → (value, from)."""
    lines = out.split("In force", 1)[1].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.strip():
            break
        key, *rest = line.split()
        rows[key] = (" ".join(rest[:-1]), rest[-1])
    return rows


def bare_env(tmp_path: Path, config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THE_LOOP_", "ANTHROPIC_"))}
    return {**env, "HOME": str(tmp_path), "THE_LOOP_CONFIG": str(config)}


def test_every_setting_of_budget_and_sandbox_is_shown_with_its_source():
    budget = {"usd": 2.5, "daily": {"tokens": 5_000_000, "repository": {"usd": 20}}}
    config = parse_config({"routing": {"budget": budget, "sandbox": {"network": "host"}}}, "f.yaml")
    rows = {r.key: (r.value, r.source) for r in in_force(config)}
    shown = {k for k in rows if k.startswith("routing.budget.")}
    caps = [
        f"{w}.{s}{k}"
        for w in ("daily", "monthly")
        for s in ("", "repository.")
        for k in ("tokens", "usd")
    ]
    assert shown == {f"routing.budget.{k}" for k in ("tokens", "usd", "minutes", *caps)}
    assert rows["routing.budget.usd"] == ("2.5", FILE)
    assert rows["routing.budget.tokens"] == ("no limit", DEFAULT)
    assert rows["routing.budget.daily.tokens"] == ("5000000", FILE)
    assert rows["routing.budget.daily.repository.usd"] == ("20", FILE)
    assert rows["routing.budget.monthly.usd"] == ("no limit", DEFAULT)
    assert rows["routing.sandbox.network"] == ("host", FILE)
    assert rows["routing.sandbox.limits.processes"] == ("512", DEFAULT)
    assert rows["routing.sandbox.apiKeyFile"][1] == ENVIRONMENT
    assert "ANTHROPIC_API_KEY" in rows["routing.sandbox.apiKeyFile"][0]
    assert rows["harnesses[claude].args"] == ("none", DEFAULT)


def test_launch_arguments_come_from_their_one_resolver_and_say_which_key():
    config = parse_config({"routing": {"harnessArgs": {"claude": ["--verbose"]}}})
    rows = {r.key: (r.value, r.source) for r in in_force(config)}
    assert rows["routing.harnessArgs.claude"] == ("--verbose", FILE)
    sandbox = parse_config({"routing": {"sandbox": {"mode": "nonsense"}}})
    mode = next(r for r in in_force(sandbox) if r.key == "routing.sandbox.mode")
    assert mode.value == "bubblewrap (from 'nonsense')"


def test_config_check_shows_the_budget_and_memory_limit_in_force(tmp_path):
    config = tmp_path / "cli-config.yaml"
    config.write_text(BUDGET_AND_MEMORY)
    done = the_loop("config", "check", str(config), env=bare_env(tmp_path, config))
    assert done.returncode == 0, done.stderr
    rows = rows_of(done.stdout)
    assert rows["routing.budget.tokens"] == ("100000", "file")
    assert rows["routing.gates.approveAfter"] == ("design", "file")
    assert rows["routing.sandbox.limits.memory"] == ("1.0GiB", "file")
    assert rows["routing.sandbox.limits.processes"] == ("512", "default")
    assert rows["routing.sandbox.egress"] == ("example.org:443", "file")
    assert rows["harnesses[claude].args"] == ("--dangerously-skip-permissions", "file")
    assert rows["routing.gates.approveAfter"] == ("design", "file")


def test_without_a_file_config_check_shows_the_defaults_as_defaults(tmp_path):
    absent = tmp_path / "cli-config.yaml"
    done = the_loop("config", "check", env=bare_env(tmp_path, absent))
    assert done.returncode == 0, done.stderr
    assert f"{absent} does not exist: the App runs on the defaults" in done.stdout
    rows = rows_of(done.stdout)
    expected = {r.key: (r.value, r.source) for r in in_force(OperatorConfig())}
    assert rows.keys() == expected.keys()
    assert rows["routing.budget.tokens"] == ("no limit", "default")
    assert rows["routing.sandbox.limits.memory"] == ("4.0GiB", "default")
    assert rows["routing.gates.approveAfter"] == ("none", "default")
    assert {source for _, source in rows.values()} == {"default", "environment"}


def test_doctor_shows_the_same_table(tmp_path):
    config = tmp_path / "cli-config.yaml"
    config.write_text(BUDGET_AND_MEMORY)
    env = bare_env(tmp_path, config)
    env["THE_LOOP_URL"] = f"http://127.0.0.1:{free_port()}"  # no App: that check fails
    done = the_loop("doctor", env=env)
    assert done.returncode == 1, done.stderr
    rows = rows_of(done.stdout)
    assert rows["routing.budget.tokens"] == ("100000", "file")
    assert rows["routing.gates.approveAfter"] == ("design", "file")
    assert rows["routing.sandbox.limits.memory"] == ("1.0GiB", "file")
