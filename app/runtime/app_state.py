"""The shared objects of one App process: engine, services, router, inbox workers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import Engine

from app.audit import EventLog
from app.config import Settings, config_findings, load_config
from app.fleet import SpawnerSweep
from app.github import (
    GitHubApp,
    InboxWorker,
    IngestWriter,
    LogLoop,
    Reconciler,
    Router,
    Services,
    interval_of,
)
from app.ingress import SampledLog
from app.runtime.event_routes import build_router
from app.store import (
    JobSignal,
    PeriodicPrune,
    Pruned,
    Retention,
    Sessions,
    look_after,
    make_engine,
    migrate,
)
from app.web import Meters
from app.workitems import ProgressPublisher, ProgressWatch
from channels import build_mirror

log = logging.getLogger(__name__)


@dataclass
class AppState:
    settings: Settings
    engine: Engine
    # Every session the App opens comes from here, and carries the App's hooks: its job
    # signal (wakes the spawners' long polls when a job commits) and its progress watch.
    sessions: Sessions
    jobs: JobSignal
    watch: ProgressWatch
    services: Services
    router: Router
    workers: list[InboxWorker] = field(default_factory=list)
    ingest: IngestWriter = field(init=False)
    progress: ProgressPublisher = field(init=False)
    sampled: SampledLog = field(init=False)
    meters: Meters = field(init=False)
    pruner: PeriodicPrune = field(init=False)
    spawner_sweep: SpawnerSweep = field(init=False)  # counts silent spawners dead
    log_loop: LogLoop | None = field(default=None, init=False)  # reads GitHub's delivery log
    # Releases the process's WAL checkpointer (SQLite) while inbox workers run: their
    # commits then never checkpoint holding the write lock every webhook waits for.
    _checkpoints_done: Callable[[], None] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.ingest = IngestWriter(self.engine, self.services.events, self.router.routes)
        self.progress = ProgressPublisher(self.services, self.sessions, self.watch)
        self.sampled = SampledLog(self.services.events)
        self.meters = Meters(self.sessions, self.sampled, lambda: self.services.config)
        self.pruner = PeriodicPrune(
            self.engine,
            retention_of(self.settings),
            self.settings.the_loop_prune_interval,
            self.services.clock,
            self._pruned,
        )
        self.spawner_sweep = SpawnerSweep(
            self.services,
            self.sessions,
            timedelta(seconds=self.settings.the_loop_spawner_dead_seconds),
            self.services.clock,
        )

    def _pruned(self, pruned: Pruned) -> None:
        if pruned.total():
            self.services.events.emit(
                "store.pruned",
                bodies=pruned.bodies,
                deliveries=pruned.deliveries,
                events=pruned.events,
                spawner_event_ids=pruned.spawner_event_ids,
            )

    def known_token(self, authorization: str) -> bool:
        """Whether an `Authorization: Bearer …` value names a live spawner or session token."""
        from app.fleet import authenticate

        with self.sessions() as session:
            return authenticate(session, authorization, self.services.clock()) is not None

    def wake_workers(self) -> None:
        for worker in self.workers:
            worker.wake.set()

    def start_workers(self, count: int) -> None:
        for index in range(count):
            worker = InboxWorker(
                self.services, self.sessions, self.router, yield_to=self.ingest.pressed
            )
            worker.name = f"{worker.name}:{index}"
            self.workers.append(worker)
            worker.start()
        if count:
            self.progress.start()
            self.pruner.start()
            self.spawner_sweep.start()
            self.start_log_loop()
            if self._checkpoints_done is None:
                self._checkpoints_done = look_after(self.engine)
        # The chat mirror's sender (if the mirror has one) runs beside the inbox workers.
        start_mirror = getattr(self.services.mirror, "start", None)
        if callable(start_mirror):
            start_mirror()

    def reconciler(self) -> Reconciler:
        """This process's reader of GitHub's delivery log; what it stores wakes the workers."""
        return Reconciler(
            self.settings,
            self.engine,
            self.services.github,
            self.ingest,
            self.services.events,
            self.services.clock,
            on_recovered=self.wake_workers,
        )

    def start_log_loop(self) -> None:
        """Read the delivery log now and then on (pull mode: instead of webhooks), unless
        turned off or the App has no GitHub identity to read it with."""
        interval = interval_of(self.settings)
        if interval is None or not self.services.github.configured or self.log_loop:
            return
        self.log_loop = LogLoop(self.reconciler(), interval)
        self.log_loop.start()

    def stop_workers(self) -> None:
        if self.log_loop is not None:
            self.log_loop.stop()
            self.log_loop = None
        for worker in self.workers:
            worker.stop()
        self.progress.stop()
        self.pruner.stop()
        self.spawner_sweep.stop()
        if self._checkpoints_done is not None:
            self._checkpoints_done()
            self._checkpoints_done = None
        stop_mirror = getattr(self.services.mirror, "stop", None)
        if callable(stop_mirror):
            stop_mirror()

    def close(self) -> None:
        """Stop everything this state started and release the database."""
        self.jobs.close()
        self.stop_workers()
        self.ingest.close()
        self.sampled.close()
        self.watch.unwatch(self.sessions)
        self.engine.dispose()


def retention_of(settings: Settings) -> Retention:
    """The ages past which the store forgets, from the settings."""
    return Retention(
        bodies=timedelta(days=settings.the_loop_retain_bodies_days),
        dedupe=timedelta(days=settings.the_loop_retain_dedupe_days),
        events=timedelta(days=settings.the_loop_retain_events_days),
        spawner_event_ids=timedelta(days=settings.the_loop_retain_spawner_event_ids_days),
    )


def build_state(
    settings: Settings, web_threads: int = 0, inbox_workers: int | None = None
) -> AppState:
    """Open the database (migrating it), read the operator config, build the clients and
    learn who the App is on GitHub. The pool is sized for `web_threads` serving requests and
    `inbox_workers` (default: THE_LOOP_INBOX_WORKERS)."""
    config = load_config(settings.the_loop_config)
    workers = settings.the_loop_inbox_workers if inbox_workers is None else inbox_workers
    engine = make_engine(settings.database_url, web_threads=web_threads, inbox_workers=workers)
    sessions = Sessions(engine)
    jobs = JobSignal().serve(sessions)
    # The progress comment follows every flush of a session the App opens.
    watch = ProgressWatch(timedelta(seconds=settings.the_loop_progress_window_seconds))
    watch.watch(sessions)
    migrate(engine)
    events = EventLog(settings.events_path, engine)
    for finding in config_findings(config):
        log.warning("%s: %s: %s", config.source, finding.key, finding.message)
        events.emit("config.conflict", key=finding.key, message=finding.message, file=config.source)
    for finding in config.ignored:
        log.info("%s: %s: %s", config.source, finding.key, finding.message)
        events.emit("config.ignored", key=finding.key, message=finding.message, file=config.source)
    mirror = build_mirror(settings, config, sessions, events)
    github = GitHubApp(settings)
    github.bot_login()  # learn the App's own login now; asked again later if GitHub is away
    services = Services(
        settings=settings, config=config, events=events, github=github, mirror=mirror
    )
    return AppState(
        settings=settings,
        engine=engine,
        sessions=sessions,
        jobs=jobs,
        watch=watch,
        services=services,
        router=build_router(),
    )
