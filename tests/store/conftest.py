"""Fixtures of the store's tests: a migrated database with the App's services around it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.audit import EventLog
from app.config.operator_config import OperatorConfig
from app.config.process_settings import load_settings
from app.github.client import GitHubApp
from app.github.services import Services, utcnow
from app.store.engines import make_engine, migrate


class Clock:
    """A controllable clock, starting just after anything the test stores."""

    def __init__(self) -> None:
        self.now = utcnow() + timedelta(seconds=1)

    def __call__(self):
        return self.now


@pytest.fixture
def store(database_url, tmp_path):
    engine = make_engine(database_url)
    migrate(engine)
    clock = Clock()
    settings = load_settings({"THE_LOOP_STATE_DIR": str(tmp_path)}, dotenv=None)
    services = Services(
        settings=settings,
        config=OperatorConfig(),
        events=EventLog(tmp_path / "events.jsonl", engine),
        github=GitHubApp(settings),
        clock=clock,
    )
    yield engine, services, clock
    engine.dispose()
