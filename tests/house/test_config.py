"""Operator config: the keys of design.md, the one harness-args resolver, clear errors."""

from __future__ import annotations

import pytest

from app.config.operator_config import (
    ConfigError,
    InteractionMode,
    config_findings,
    harness_args,
    load_config,
    parse_config,
)
from app.config.process_settings import SettingsError, load_settings

DESIGN_EXAMPLE = """
harnesses:
  - name: claude
    default: true
    command: claude
    args: ["--dangerously-skip-permissions"]
  - name: codex
models:
  - name: opus
  - name: sonnet
    harnesses: [claude]
effort: [low, medium, high]
routing:
  interaction: {mode: work-item}
  authorizedUsers: [octocat]
  workspace: {root: ~/the-loop-work}
  harnessTrust: {enabled: true, scope: workspace-root, acceptBypassPermissions: auto}
  trigger: {label: "the-loop: auto-execute", executeKeyword: "the-loop execute"}
standingSessions:
  sessions: [{name: supervisor, cwd: ~/ops}]
slack: {channel: C0123456, users: {U024BE7LH: octocat}}
"""


def test_design_example_loads(tmp_path):
    path = tmp_path / "cli-config.yaml"
    path.write_text(DESIGN_EXAMPLE)
    config = load_config(path)
    assert [h.name for h in config.harnesses] == ["claude", "codex"]
    assert [e.name for e in config.effort] == ["low", "medium", "high"]
    assert config.routing.authorized_users == ["octocat"]
    assert config.slack.users == {"U024BE7LH": "octocat"}
    assert config.standing_sessions.sessions[0].harness_args is None
    assert config.routing.trigger.execute_keyword == "the-loop execute"


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("harnesses: [{name: claude, args: [--a]}]", ["--a"]),
        ("routing: {harnessArgs: {claude: [--b]}}", ["--b"]),
        (
            "harnesses: [{name: claude, args: [--a]}]\nrouting: {harnessArgs: {claude: [--b]}}",
            ["--a"],
        ),
        ("harnesses: [{name: claude, args: []}]\nrouting: {harnessArgs: {claude: [--b]}}", []),
        ("harnesses: [{name: claude}]", []),
        ("{}", []),
    ],
)
def test_harness_args_resolver(tmp_path, yaml_text, expected):
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    assert harness_args(load_config(path), "claude") == expected


def test_both_homes_is_reported_once_as_a_conflict():
    config = parse_config(
        {
            "harnesses": [{"name": "claude", "args": ["--a"]}],
            "routing": {"harnessArgs": {"claude": ["--b"]}},
        }
    )
    findings = config_findings(config)
    assert len(findings) == 1 and "harnesses[].args wins" in findings[0].message


def test_unknown_interaction_mode_resolves_to_work_item():
    assert (
        parse_config({"routing": {"interaction": {"mode": "clii"}}}).interaction_mode
        == InteractionMode.WORK_ITEM
    )
    assert (
        parse_config({"routing": {"interaction": {"mode": "cli"}}}).interaction_mode
        == InteractionMode.CLI
    )


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("harnesses: [{name: claude, args: --x}]", "harnesses[claude].args"),
        ("models: [{name: '--model=evil'}]", "models[0].name"),
        ("effort: [high, 'low; rm -rf /']", "effort[1].name"),
        ("routing: {harnessTrust: {scope: everywhere}}", "routing.harnessTrust.scope"),
        ("harnesses: [{name: claude}, {name: claude}]", "declared twice"),
        ("- just a list", "top level must be a mapping"),
        ("harnesses: [", "not valid YAML"),
    ],
)
def test_bad_config_names_the_file_and_the_key(tmp_path, yaml_text, message):
    path = tmp_path / "cli-config.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    assert str(path) in str(excinfo.value)
    assert message in str(excinfo.value)


def test_missing_config_file_means_defaults(tmp_path):
    config = load_config(tmp_path / "absent.yaml")
    assert config.harnesses == [] and config.routing.trigger.label == "the-loop: auto-execute"


def test_settings_from_env_and_dotenv(tmp_path):
    dotenv = tmp_path / ".env"
    dotenv.write_text('GITHUB_WEBHOOK_SECRET="from-file"\nPORT=4001\n')
    settings = load_settings({"PORT": "5000", "THE_LOOP_STATE_DIR": str(tmp_path)}, dotenv=dotenv)
    assert settings.github_webhook_secret == "from-file"
    assert settings.port == 5000  # the environment wins over .env
    assert settings.database_url == f"sqlite:///{tmp_path / 'the-loop.db'}"


def test_bad_setting_names_the_variable():
    with pytest.raises(SettingsError, match="PORT"):
        load_settings({"PORT": "eighty"}, dotenv=None)


def test_app_refuses_to_start_without_a_webhook_secret(tmp_path):
    from app.runtime.flask_app import create_app

    with pytest.raises(SettingsError, match="GITHUB_WEBHOOK_SECRET"):
        create_app(load_settings({"THE_LOOP_STATE_DIR": str(tmp_path)}, dotenv=None))


def test_max_sessions_is_unlimited_by_default_and_a_bad_value_names_key_and_file() -> None:
    assert parse_config({}).routing.max_sessions is None
    assert parse_config({"routing": {"maxSessions": 2}}).routing.max_sessions == 2
    for bad in (0, -1, "two", True, 1.5):
        with pytest.raises(ConfigError) as caught:
            parse_config({"routing": {"maxSessions": bad}}, "/etc/the-loop/cli-config.yaml")
        assert str(caught.value).startswith("/etc/the-loop/cli-config.yaml: routing.maxSessions:")
