"""A key the App does not know is an error naming the key likely meant — in `config check` and
in every command that starts something, which then starts nothing — except the older
daemon's own keys, which load and are listed as ignored. Every problem of a file is named in
one run."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.config.known_keys import OLDER_DAEMON_KEYS, check_keys, known_paths, unknown_key
from app.config.operator_config import ConfigError, OperatorConfig, parse_config
from app.config.sandbox_config import ConfigModel
from tests.support import free_port

ROOT = Path(__file__).resolve().parents[2]

# One letter wrong in one key of each section: (the file, the key written, the key meant).
TYPOS = {
    "top level": ("harneses: [{name: claude}]\n", "harneses", "harnesses"),
    "routing": ("routing:\n  triger: {label: go}\n", "routing.triger", "routing.trigger"),
    "routing.budget": (
        "routing:\n  budget:\n    token: 100000\n",
        "routing.budget.token",
        "routing.budget.tokens",
    ),
    "routing.sandbox": (
        "routing:\n  sandbox:\n    netwrk: host\n",
        "routing.sandbox.netwrk",
        "routing.sandbox.network",
    ),
    "routing.sandbox.limits": (
        "routing:\n  sandbox:\n    limits: {memroy: 1GiB}\n",
        "routing.sandbox.limits.memroy",
        "routing.sandbox.limits.memory",
    ),
    "slack": ("slack:\n  chanel: C0123456\n", "slack.chanel", "slack.channel"),
}


def the_loop(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": str(ROOT), **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def the_line(path: Path, written: str, meant: str) -> str:
    return f"the-loop: {path}: {written}: unknown key — did you mean {meant}?"


@pytest.mark.parametrize("section", list(TYPOS))
def test_config_check_names_a_typo_and_the_key_meant(tmp_path, section):
    text, written, meant = TYPOS[section]
    path = tmp_path / "cli-config.yaml"
    path.write_text(text)
    done = the_loop("config", "check", str(path))
    assert done.returncode == 2
    assert the_line(path, written, meant) in done.stderr.splitlines()
    assert "loads" not in done.stdout


def _bare_directory_env(tmp_path: Path, config: Path, port: int) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GITHUB_", "THE_LOOP_", "DATABASE_URL", "SLACK_"))
    }
    env.update(
        HOME=str(tmp_path),
        PORT=str(port),
        PYTHONPATH=str(ROOT),
        THE_LOOP_CONFIG=str(config),
        THE_LOOP_URL=f"http://127.0.0.1:{port}",
        THE_LOOP_SPAWNER_TOKEN="a-token-the-spawner-never-gets-to-use",
    )
    return env


def _serves(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("section", list(TYPOS))
def test_up_refuses_a_typo_with_the_same_line_and_starts_nothing(tmp_path, section):
    text, written, meant = TYPOS[section]
    config = tmp_path / "cli-config.yaml"
    config.write_text(text)
    port = free_port()
    env = _bare_directory_env(tmp_path, config, port)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "up"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a started App would still be serving when this ran out
    )
    assert done.returncode == 2, done.stdout
    assert the_line(config, written, meant) in done.stderr.splitlines()
    assert not _serves(port)
    assert "App on" not in done.stdout  # nothing was announced, so nothing was started
    assert not (tmp_path / ".env").exists()  # nothing written for a first run either
    assert not (tmp_path / ".local").exists()  # no database, no spawner state


@pytest.mark.parametrize("command", [["serve"], ["spawner"]])
def test_serve_and_the_spawner_refuse_the_same_way(tmp_path, command):
    text, written, meant = TYPOS["routing.budget"]
    config = tmp_path / "cli-config.yaml"
    config.write_text(text)
    port = free_port()
    done = the_loop(*command, cwd=tmp_path, env=_bare_directory_env(tmp_path, config, port))
    assert done.returncode == 2
    assert the_line(config, written, meant) in done.stderr.splitlines()
    assert not _serves(port)
    assert not (tmp_path / ".local").exists()


def test_two_bad_values_and_an_unknown_key_are_named_in_one_run(tmp_path):
    path = tmp_path / "cli-config.yaml"
    path.write_text(
        "routing:\n  maxSessions: 0\n  budget: {usd: -5}\n  sandbox: {limits: {memroy: 1GiB}}\n"
    )
    done = the_loop("config", "check", str(path))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert the_line(path, "routing.sandbox.limits.memroy", "routing.sandbox.limits.memory") in lines
    assert any(line.startswith(f"the-loop: {path}: routing.maxSessions: ") for line in lines)
    assert any(line.startswith(f"the-loop: {path}: routing.budget.usd: ") for line in lines)
    assert len(lines) == 3
    with pytest.raises(ConfigError) as raised:
        parse_config({"routing": {"maxSessions": 0, "budget": {"usd": -5}, "x": 1}}, "f.yaml")
    assert [p.key for p in raised.value.problems] == [
        "routing.x",
        "routing.maxSessions",
        "routing.budget.usd",
    ]


def test_a_key_with_no_near_match_is_unknown_to_this_version():
    with pytest.raises(ConfigError) as raised:
        parse_config({"routing": {"sandbox": {"quantumTunnels": True}}}, "f.yaml")
    (problem,) = raised.value.problems
    assert problem.key == "routing.sandbox.quantumTunnels"
    assert problem.message.startswith("unknown to this version of the-loop (known here: mode, ")
    assert "did you mean" not in problem.message


def test_a_key_written_in_the_wrong_section_is_pointed_to_its_place():
    found = unknown_key("routing", "tokens", ["budget", "sandbox"], OperatorConfig)
    assert found.message == "unknown key here — did you mean routing.budget.tokens?"


def test_snake_case_and_camel_case_both_load_and_case_typos_are_caught():
    assert parse_config({"routing": {"max_sessions": 2}}).routing.max_sessions == 2
    assert parse_config({"routing": {"maxSessions": 2}}).routing.max_sessions == 2
    with pytest.raises(ConfigError, match=r"routing\.MaxSessions: unknown key — did you mean"):
        parse_config({"routing": {"MaxSessions": 2}})


def test_a_person_entry_with_a_typo_is_an_error_and_its_name_is_ignored():
    data = {"routing": {"authorizedUsers": [{"github": "hubot", "slak": "U1", "name": "Hu"}]}}
    with pytest.raises(ConfigError) as raised:
        parse_config(data, "f.yaml")
    (problem,) = raised.value.problems
    assert problem.key == "routing.authorizedUsers[hubot].slak"
    assert problem.message == "unknown key — did you mean routing.authorizedUsers[hubot].slack?"


def _instance(pattern: str) -> dict[str, object]:
    """A document holding the older daemon's key `pattern` (`[]` → an entry, `*` → a key)."""
    parts = pattern.split(".")
    value: object = "some value"
    for part in reversed(parts):
        if part.endswith("[]"):
            value = [{"github": "octocat", **value} if isinstance(value, dict) else value]
            part = part[:-2]
        value = {"stop" if part == "*" else part: value}
    assert isinstance(value, dict)
    return value


@pytest.mark.parametrize("older", OLDER_DAEMON_KEYS, ids=lambda k: k.pattern)
def test_each_of_the_older_daemons_keys_loads_and_is_listed_as_ignored(older):
    config = parse_config(_instance(older.pattern), "older.yaml")
    (ignored,) = config.ignored
    assert ignored.message == older.why
    assert ignored.key.replace("[octocat]", "[]").replace(".stop", ".*") == older.pattern
    assert older.origin


def test_a_field_added_to_a_model_is_known_without_a_list_to_update():
    class Section(ConfigModel):
        new_setting: int = 1

    class Root(ConfigModel):
        section: Section = Section()
        named: dict[str, Section] = {}

    data = {"section": {"newSetting": 2}, "named": {"a": {"newSettin": 3}}}
    found = check_keys(data, Root)
    assert found.older == ()
    assert [(f.key, f.message) for f in found.unknown] == [
        ("named.a.newSettin", "unknown key — did you mean named.a.newSetting?")
    ]
    assert "routing.budget.tokens" in set(known_paths(OperatorConfig))


def test_the_configuration_guide_lists_every_older_daemon_key():
    guide = (ROOT / "docs" / "configuration.md").read_text()
    missing = [k.pattern for k in OLDER_DAEMON_KEYS if f"`{k.pattern}`" not in guide]
    assert missing == []
