"""A session's environment is built from nothing: what its harness needs, plus the names
the operator lists in `routing.sandbox.env.passEnv`. Nothing else the spawner holds — a
cloud key, a database password, a personal token, the App's own credentials — reaches it,
whether the session runs in bubblewrap or unconfined, and whatever environment the tmux
server was first started from."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config.operator_config import ConfigError, parse_config
from app.spawner.confine.sessionenv import described, session_environment
from app.spawner.context import SpawnerContext
from app.spawner.devbox_checks import Level, check_session_env
from app.spawner.session.tmux import TmuxRunner, stale_names
from tests.jobs_support import SESSION_TOKEN, WI, make_config, run_ok, spawn_job, standin_context
from tests.spawner_support import SANDBOX_MODES, StandIn

# What an operator's shell or service unit holds beside what the spawner needs.
OPERATOR_SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-wJalrXUtnFEMI",
    "PGPASSWORD": "pg-password-hunter2",
    "NPM_TOKEN": "npm_TokenOfTheOperator000",
    "GITHUB_PAT": "ghp_PersonalAccessToken000",
    "THE_LOOP_METRICS_TOKEN": "tlm_MetricsToken000",
    "GITHUB_TOKEN": "ghs_AppToken000",
    "ANTHROPIC_API_KEY": "sk-ant-operator-key-000",
}


def test_only_the_harness_names_and_the_listed_ones_are_kept() -> None:
    spawner = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/op",
        "LANG": "C.UTF-8",
        "LC_TIME": "en_GB.UTF-8",
        "TERM": "xterm",
        "TZ": "UTC",
        "SSL_CERT_FILE": "/etc/ca.pem",
        "HTTPS_PROXY": "http://user:pw@proxy:3128",
        "no_proxy": "localhost",
        "NODE_OPTIONS": "--max-old-space-size=4096",
        "SOMETHING_NOBODY_THOUGHT_OF": "x",
        **OPERATOR_SECRETS,
    }
    listed = ["NODE_OPTIONS", "GITHUB_TOKEN", "THE_LOOP_METRICS_TOKEN", "UNSET_ONE"]
    env = session_environment(spawner, listed)
    assert sorted(env) == [
        "HOME",
        "HTTPS_PROXY",
        "LANG",
        "LC_TIME",
        "NODE_OPTIONS",
        "PATH",
        "SSL_CERT_FILE",
        "TERM",
        "TZ",
        "no_proxy",
    ]
    assert env["NODE_OPTIONS"] == "--max-old-space-size=4096"
    assert "NODE_OPTIONS" not in session_environment(spawner)  # only when listed


def test_doctor_shows_names_and_only_harmless_values() -> None:
    spawner = {"PATH": "/usr/bin", "HTTPS_PROXY": "http://u:pw@p:1", "NODE_OPTIONS": "--x", **{}}
    shown = {s.name: s.value for s in described(spawner, ["NODE_OPTIONS"])}
    assert shown == {
        "PATH": "/usr/bin",
        "HTTPS_PROXY": None,
        "NODE_OPTIONS": None,
        "THE_LOOP_SESSION_TOKEN": None,
    }
    check = check_session_env(spawner, ["NODE_OPTIONS"])
    assert check.level is Level.OK and "PATH=/usr/bin" in check.detail
    assert "pw" not in check.detail and "--x" not in check.detail
    warned = check_session_env(spawner, ["GITHUB_TOKEN", "MISSING"])
    assert warned.level is Level.WARN and "GITHUB_TOKEN" in warned.detail
    assert "MISSING" in warned.detail and "passEnv" in warned.fix


def test_a_pass_env_entry_that_is_no_name_is_refused_naming_the_key() -> None:
    config = parse_config({"routing": {"sandbox": {"env": {"passEnv": ["NODE_OPTIONS"]}}}})
    assert config.routing.sandbox.env.pass_env == ["NODE_OPTIONS"]
    with pytest.raises(ConfigError, match=r"test\.yaml: routing\.sandbox\.env\.passEnv"):
        parse_config({"routing": {"sandbox": {"env": {"passEnv": ["A=B"]}}}}, "test.yaml")


def test_what_a_server_started_elsewhere_still_holds_is_found() -> None:
    listing = "PATH=/usr/bin\nAWS_SECRET_ACCESS_KEY=x\n-REMOVED\nPGPASSWORD=a=b\n"
    assert stale_names(listing, {"PATH": "/usr/bin"}) == ["AWS_SECRET_ACCESS_KEY", "PGPASSWORD"]


@pytest.fixture
def dirty(home: Path) -> dict[str, str]:
    """The spawner's environment: what it needs, a name the operator passes, and secrets."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "NODE_OPTIONS": "--max-old-space-size=1234",
        **OPERATOR_SECRETS,
    }


@pytest.fixture
def dirty_runner(dirty: dict[str, str]) -> Iterator[TmuxRunner]:
    """The spawner's tmux server, first started by an operator from a shell holding the
    secrets (a server outlives the spawner that started it)."""
    socket = f"the-loop-env-{uuid.uuid4().hex[:10]}"
    subprocess.run(
        ["tmux", "-L", socket, "start-server", ";", "set", "-g", "exit-empty", "off"],
        env=dirty,
        check=True,
    )
    runner = TmuxRunner(socket, env=dirty, pass_env=["NODE_OPTIONS", "GIT_CONFIG_NOSYSTEM"])
    try:
        yield runner
    finally:
        runner.kill_server()


@pytest.mark.parametrize("mode", SANDBOX_MODES)
def test_a_session_holds_none_of_the_spawners_secrets_but_what_is_passed(
    mode: str,
    tmp_path: Path,
    standin: StandIn,
    home: Path,
    dirty: dict[str, str],
    dirty_runner: TmuxRunner,
    origin: Path,
) -> None:
    ctx: SpawnerContext = standin_context(
        tmp_path, standin, dirty_runner, home, app_url="http://127.0.0.1:9", env=dirty
    )
    sandbox = {
        **standin.sandbox,
        "mode": mode,
        "env": {"passEnv": ["NODE_OPTIONS", "GIT_CONFIG_NOSYSTEM"]},
    }
    ctx.config = make_config(standin, tmp_path, sandbox=sandbox)
    try:
        run_ok(ctx, spawn_job(origin))
        env = standin.wait_start(WI)["env"]
    finally:
        if ctx.limiter is not None:
            ctx.limiter.release()
    assert not set(OPERATOR_SECRETS) & set(env)
    assert not set(OPERATOR_SECRETS.values()) & set(env.values())
    assert env["NODE_OPTIONS"] == "--max-old-space-size=1234"
    assert env["THE_LOOP_SESSION_TOKEN"] == SESSION_TOKEN  # the token minted for it
    assert env["THE_LOOP_WORK_ITEM_ID"] == WI
