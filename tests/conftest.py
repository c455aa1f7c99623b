"""Fixtures: a fresh store per test (SQLite, and PostgreSQL when configured), the fake GitHub
API on loopback, and the App served by a real HTTP server."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.github_api import FakeGitHub, generate_private_key_pem
from tests.fakes.server import LiveServer
from tests.support import (
    APP_ID,
    POSTGRES_URL,
    RunningApp,
    app_env,
    scratch_database,
    wsgi_app,
)

pytest_plugins = [
    "tests.spawner_support",  # tmux, git and stand-in harness fixtures
    "tests.jobs_support",  # a spawner context and its jobs
    "tests.slack_support",  # the fake Slack Web API
    "tests.claude_support",  # the real claude binary against the scripted model
    "tests.pull_support",  # the pull-request bed: App, git over HTTP, a started session
]

_HOME = pytest.StashKey[tuple[str | None, Path]]()


def pytest_configure(config: pytest.Config) -> None:
    """Every test, and every process a test starts, gets a HOME of its own: nothing a test
    runs (claude, git, gunicorn, the CLI) may read or write the real one."""
    home = Path(tempfile.mkdtemp(prefix="the-loop-test-home-"))
    config.stash[_HOME] = (os.environ.get("HOME"), home)
    os.environ["HOME"] = str(home)
    # No claude a test starts may update the machine's shared install or phone home.
    os.environ.update(DISABLE_AUTOUPDATER="1", DISABLE_TELEMETRY="1", DISABLE_ERROR_REPORTING="1")
    for name, sub in (
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_DATA_HOME", ".local/share"),
    ):
        os.environ[name] = str(home / sub)


def pytest_unconfigure(config: pytest.Config) -> None:
    real, home = config.stash.get(_HOME, (None, None))
    if home is not None:
        shutil.rmtree(home, ignore_errors=True)
    if real is not None:
        os.environ["HOME"] = real


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("CI") and shutil.which("claude") is None:
        raise pytest.UsageError(
            "CI must have the claude CLI on PATH: the real-binary tests never skip there"
        )
    if os.environ.get("CI") and not POSTGRES_URL:
        raise pytest.UsageError(
            "CI must set THE_LOOP_TEST_POSTGRES_URL: PostgreSQL tests never skip there"
        )


@pytest.fixture(scope="session")
def app_private_key() -> str:
    return generate_private_key_pem()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database: a SQLite file, or a new PostgreSQL database per test."""
    with scratch_database(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def fake_github(app_private_key: str) -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub(app_id=APP_ID, private_key_pem=app_private_key)
    with LiveServer(fake.wsgi()) as server:
        yield fake, server.url


@pytest.fixture
def settings_env(
    tmp_path: Path, database_url: str, fake_github: tuple[FakeGitHub, str], app_private_key: str
) -> dict[str, str]:
    """The environment of an App under test; tests add keys before building settings."""
    return app_env(tmp_path, database_url, fake_github[1], app_private_key)


@pytest.fixture
def running_app(settings_env: dict[str, str]) -> Iterator[RunningApp]:
    """The App (with its inbox worker) served by a real HTTP server on 127.0.0.1."""
    with wsgi_app(settings_env) as app:
        yield app
