"""The shared objects of one App process: engine, services, router, inbox workers."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import Engine

from app.config import config_findings, load_config
from app.context import Services
from app.events import EventLog
from app.github.client import GitHubApp
from app.github.router import Router
from app.github.routes import build_router
from app.settings import Settings
from app.store import make_engine, migrate
from app.worker import InboxWorker

log = logging.getLogger(__name__)


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    services: Services
    router: Router
    workers: list[InboxWorker] = field(default_factory=list)

    def wake_workers(self) -> None:
        for worker in self.workers:
            worker.wake.set()

    def start_workers(self, count: int) -> None:
        for index in range(count):
            worker = InboxWorker(self.services, self.engine, self.router)
            worker.name = f"{worker.name}:{index}"
            self.workers.append(worker)
            worker.start()

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()


def build_state(settings: Settings) -> AppState:
    """Open the database (migrating it), read the operator config, build the clients."""
    config = load_config(settings.the_loop_config)
    engine = make_engine(settings.database_url)
    migrate(engine)
    events = EventLog(settings.events_path, engine)
    for finding in config_findings(config):
        log.warning("%s: %s: %s", config.source, finding.key, finding.message)
        events.emit("config.conflict", key=finding.key, message=finding.message, file=config.source)
    services = Services(settings=settings, config=config, events=events, github=GitHubApp(settings))
    return AppState(settings=settings, engine=engine, services=services, router=build_router())
