"""Fixtures: a fresh store per test (SQLite, and PostgreSQL when configured), the fake GitHub
API on loopback, and the App served by a real HTTP server."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from app.store.engines import make_engine, migrate
from tests.fakes.anthropic import FakeAnthropic
from tests.fakes.github_api import FakeGitHub, generate_private_key_pem
from tests.fakes.scripted_model import ScriptedModel
from tests.fakes.server import LiveServer
from tests.support import (
    APP_ID,
    OPERATOR_TOKEN,
    POSTGRES_URL,
    RunningApp,
    app_env,
    migrated_postgres,
    module_setting,
    scratch_database,
    served_app,
    wsgi_app,
)

pytest_plugins = [
    "tests.spawner_support",  # tmux, git and stand-in harness fixtures
    "tests.jobs_support",  # a spawner context and its jobs
    "tests.slack_support",  # the fake Slack Web API
    "tests.claude_support",  # the real claude binary against the scripted model
    "tests.devbox_support",  # a devbox serving the App under test (`standin_devbox`)
    "tests.spawnerapi_support",  # one App per test module for the spawner API (`shared_api`)
    "tests.pull_support",  # the pull-request bed: App, git over HTTP, a started session
    "tests.phase_support",  # an executed item and its session's `the-loop phase` environment
    "tests.cgroup_support",  # the cgroups the tests' spawners made, removed after the run
    "tests.tlsapp_support",  # the App over TLS with a private CA (`tls_app`)
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
    # A checkout belongs to the session's user when the tests run as root (see
    # `confine/sessionuser.py`); the tests' own git, standing for the session, works in it.
    os.environ["GIT_CONFIG_PARAMETERS"] = "'safe.directory=*'"
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


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`sqlite_only`: a test whose subject does not depend on the backend gets its database
    (or its module's App) on SQLite alone: a parametrize mark added before any is read."""
    if metafunc.definition.get_closest_marker("sqlite_only") is None:
        return
    if "database_url" in metafunc.fixturenames:
        metafunc.definition.add_marker(
            pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
        )
    if "shared_api" in metafunc.fixturenames:
        metafunc.definition.add_marker(
            pytest.mark.parametrize("shared_api", ["sqlite"], indirect=True, scope="module")
        )


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


@pytest.fixture(scope="session")
def migrated_postgres_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One PostgreSQL database per test process, migrated to the newest revision, that each
    test's PostgreSQL `database_url` is copied from."""
    with migrated_postgres(tmp_path_factory.mktemp("template")) as name:
        yield name


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database per test: an empty SQLite file (the App under test migrates it as it
    starts, as on a first deployment), or a new PostgreSQL database copied from one already
    migrated (the migrations run once per test process, not once per test; with the
    `empty_database` marker, an empty one, for tests of the migrations themselves)."""
    template = None
    if (
        request.param == "postgres"
        and POSTGRES_URL
        and request.node.get_closest_marker("empty_database") is None
    ):
        template = request.getfixturevalue("migrated_postgres_template")
    with scratch_database(request.param, tmp_path, template) as url:
        yield url


@pytest.fixture
def fake_github(app_private_key: str) -> Iterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub(app_id=APP_ID, private_key_pem=app_private_key)
    with LiveServer(fake.wsgi()) as server:
        yield fake, server.url


@pytest.fixture
def operator_yaml(request: pytest.FixtureRequest) -> str:
    """The operator config (`cli-config.yaml`) the App under test reads: `{}`, or the module's
    `OPERATOR_YAML` (the text, or a function of fixtures that returns it)."""
    return str(module_setting(request, "OPERATOR_YAML", "{}\n"))


@pytest.fixture
def model(request: pytest.FixtureRequest) -> Iterator[ScriptedModel]:
    """The scripted model a test's sessions talk to: the module's `MODEL_SCRIPT` (the steps,
    or a function of fixtures that returns them), served on the wire its `MODEL_WIRE` names —
    `FakeAnthropic` (Claude's Messages API) unless it says `FakeResponses` (Codex's)."""
    wire = getattr(request.module, "MODEL_WIRE", FakeAnthropic)
    with wire(module_setting(request, "MODEL_SCRIPT", ())) as api:
        yield api


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """The store's engine on a fresh, migrated `database_url`, for tests without an App."""
    built = make_engine(database_url)
    migrate(built)
    yield built
    built.dispose()


@pytest.fixture
def settings_env(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    database_url: str,
    fake_github: tuple[FakeGitHub, str],
    app_private_key: str,
    operator_yaml: str,
) -> dict[str, str]:
    """The environment of an App under test, with `operator_yaml` written where it reads it.

    Markers add to it: `slack` switches the mirror on against the fake Slack, `admin_token`
    sets the operator credential (`OPERATOR_TOKEN`), `app_env(KEY=value)` sets variables."""
    env = app_env(tmp_path, database_url, fake_github[1], app_private_key)
    Path(env["THE_LOOP_CONFIG"]).write_text(operator_yaml)
    if request.node.get_closest_marker("slack"):
        from tests.slack_support import slack_env  # a plugin: imported once pytest has it

        env = slack_env(env, request.getfixturevalue("fake_slack")[1], operator_yaml)
    if request.node.get_closest_marker("admin_token"):
        env["THE_LOOP_ADMIN_TOKEN"] = OPERATOR_TOKEN
    for mark in reversed(list(request.node.iter_markers("app_env"))):
        env.update(mark.kwargs)
    return env


@pytest.fixture
def running_app(
    request: pytest.FixtureRequest, settings_env: dict[str, str]
) -> Iterator[RunningApp]:
    """The App (with its inbox worker) served by a real HTTP server on 127.0.0.1; with the
    `served` marker, as `the-loop serve` deploys it (gunicorn's asgi worker)."""
    serve = served_app if request.node.get_closest_marker("served") else wsgi_app
    with serve(settings_env) as app:
        yield app
