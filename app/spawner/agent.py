"""The claim loop: register, long-poll for jobs, run them, report results and events.

It reconnects with capped exponential backoff whenever the App is unreachable (an App
restart is just a pause), registers again after every reconnect, holds a claimed job's lease
with heartbeats while the job runs, and retries a result until the App has it. Beside it run
the event sender (the outbox), the watchdog and the spawner's own heartbeat (every few
seconds, naming the sessions it runs: silent too long, the App counts them lost). As it
starts it ends the sessions an earlier run left behind. Only a rejected token stops it.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from app.config import DEFAULT_HARNESS, OperatorConfig, offered_harnesses
from app.retry import Backoff
from app.spawner.appclient import (
    AppClient,
    AppUnavailable,
    ClaimedJob,
    MalformedJob,
    NotHeld,
    Rejected,
    Unauthorized,
)
from app.spawner.argv import adapter_for
from app.spawner.context import SpawnerContext
from app.spawner.jobkinds import run_job
from app.spawner.session.leftovers import describe_session
from app.spawner.session.tmux import TmuxError
from app.spawner.session.transcript_usage import report_ended
from app.spawner.session.watchdog import Watchdog
from app.spawner.standing_control import ControlError, ControlServer, standing_answer
from app.spawner.standing_sessions import PREFIX as STANDING_PREFIX
from app.spawner.steps.diskwatch import watch as watch_disk
from app.spawner.steps.netlaunch import restore_networks, session_over
from app.spawner.steps.sessionlimits import clean_stale_limits

log = logging.getLogger(__name__)


def hostable_harnesses(config: OperatorConfig, env: Mapping[str, str]) -> list[str]:
    """Harnesses this spawner can run: declared (or the built-in default when none is), with
    an adapter that hosts sessions, and an executable found on PATH."""
    names = offered_harnesses(config) if config.harnesses else [DEFAULT_HARNESS]
    path = env.get("PATH")
    return [n for n in names if shutil.which(adapter_for(config, n).executable, path=path)]


@dataclass
class AgentOptions:
    name: str
    repositories: list[str] = field(default_factory=list)
    wait: float = 25.0
    concurrency: int = 4
    watchdog_interval: float = 5.0
    transcript_interval: float = 60.0  # without a gateway: how often transcripts are read
    max_backoff: float = 30.0
    heartbeat: float = 5.0  # seconds between "alive" calls (THE_LOOP_SPAWNER_HEARTBEAT_SECONDS)


class Agent:
    def __init__(self, ctx: SpawnerContext, client: AppClient, options: AgentOptions) -> None:
        self.ctx = ctx
        self.client = client
        self.options = options
        self.stop = threading.Event()
        self.spawner_id: int | None = None
        self._slots = threading.Semaphore(options.concurrency)
        self._pool = ThreadPoolExecutor(options.concurrency, thread_name_prefix="job")
        describe = describe_session(ctx.config, ctx.home, ctx.state_dir, ctx.env)
        self.watchdog = Watchdog(
            ctx.runner,
            ctx.registry,
            ctx.events.emit,
            ctx.locks,
            describe,
            ended=self._ended,
        )

    def _ended(self, work_item_id: str) -> dict[str, Any]:
        """A session ended: its pass, network and cgroup go (what its limits counted is
        returned for its end's event); without the gateway, its usage is read back from
        its transcript."""
        counted = session_over(self.ctx, work_item_id)
        if self.ctx.models is None:
            self._transcript_ended(work_item_id)
        return counted

    def _transcript_ended(self, work_item_id: str) -> None:
        """A session that ran without the gateway ended: its usage is read back from its
        transcript."""
        record = self.ctx.registry.get(work_item_id)
        if record is not None:
            ctx = self.ctx
            report_ended(ctx.config, ctx.home, ctx.state_dir, ctx.events.emit, record)

    # -- the loops ------------------------------------------------------------------------

    def run(self) -> int:
        """Serve until `stop` is set (0) or the App rejects the token (2).

        The claim loop runs in its own thread so that a stop never waits for a long-poll to
        time out; a job claimed in that instant is simply offered again after its lease.
        """
        code: list[int] = []
        claims = threading.Thread(target=lambda: code.append(self._claim_loop()), daemon=True)
        helpers = [
            threading.Thread(target=self.ctx.events.run, args=(self.stop,), daemon=True),
            threading.Thread(target=self._watch, daemon=True),
            threading.Thread(target=self._beat, daemon=True),
            threading.Thread(target=watch_disk, args=(self.ctx, self.stop), daemon=True),
            claims,
        ]
        if self.ctx.models is not None:  # model usage, reported every few seconds
            helpers.append(
                threading.Thread(target=self.ctx.models.run, args=(self.stop,), daemon=True)
            )
        if self.ctx.routes is not None:  # credential routes' requests, counted per item
            helpers.append(
                threading.Thread(target=self.ctx.routes.run, args=(self.stop,), daemon=True)
            )
        self._end_left_behind()
        restore_networks(self.ctx)  # live (standing) sessions' sockets, served again
        clean_stale_limits(self.ctx)  # the cgroups of sessions that ended meanwhile go
        control = self._control()
        for thread in helpers:
            thread.start()
        while claims.is_alive() and not self.stop.wait(0.5):
            pass
        self.stop.set()
        if control is not None:
            control.stop()
        self._pool.shutdown(wait=True)
        if self.ctx.networks is not None:
            self.ctx.networks.stop()  # the sockets stay for a spawner started after this one
        if self.ctx.models is not None:
            self.ctx.models.report()
        try:
            self.ctx.events.flush()
        except (AppUnavailable, Unauthorized) as exc:
            log.warning("events left to send at shutdown: %s", exc)
        return code[0] if code else 0

    def _end_left_behind(self) -> None:
        """End the work items' sessions an earlier run left: nobody watched them since."""
        try:
            self.watchdog.end_left_behind(lambda owner: owner.startswith(STANDING_PREFIX))
        except TmuxError as exc:
            log.error("the sessions an earlier spawner left could not be ended: %s", exc)

    def _beat(self) -> None:
        """Tell the App every `heartbeat` seconds that this spawner lives, and which work
        items' sessions it runs (a lost one it names is running again)."""
        failing = False
        while True:
            sessions = [
                r.work_item_id for r in self.ctx.registry.all() if r.live and not r.standing
            ]
            try:
                self.client.alive(sessions)
                failing = False
            except (AppUnavailable, Rejected, Unauthorized) as exc:
                if not failing:  # said once per outage, not every few seconds
                    log.warning("heartbeat to the App failed: %s", exc)
                failing = True
            if self.stop.wait(self.options.heartbeat):
                return

    def _control(self) -> ControlServer | None:
        """Serve `the-loop standing start|stop` (standing sessions are launched here, where
        the gateway mints their passes); without it those commands say no spawner runs."""
        try:
            return ControlServer(self.ctx.state_dir, standing_answer(self.ctx)).start()
        except ControlError as exc:
            log.error("standing sessions cannot be started through this spawner: %s", exc)
            return None

    def _claim_loop(self) -> int:
        backoff = Backoff(cap=self.options.max_backoff)
        while not self.stop.is_set():
            try:
                if self.spawner_id is None:
                    self._register()
                self._slots.acquire()
                try:
                    limit = self.ctx.config.routing.max_sessions
                    job = self.client.claim(self.options.wait, limit)
                except BaseException:
                    self._slots.release()
                    raise
                backoff.reset()
                if job is None:
                    self._slots.release()
                    continue
                self._pool.submit(self._handle, job)
            except MalformedJob as exc:
                log.error("job %s cannot be read: %s", exc.job_id, exc)
                if exc.job_id:
                    self._report(exc.job_id, False, {}, f"malformed job: {exc}")
            except Unauthorized as exc:
                log.error("the App rejected this spawner's token: %s", exc)
                return 2
            except (AppUnavailable, Rejected) as exc:
                if self.stop.is_set():  # the poll was cut off by the stop itself: not news
                    break
                delay = backoff.next()
                log.warning("App unavailable (%s); retrying in %.1fs", exc, delay)
                self.spawner_id = None  # register again: the App may have restarted
                self.stop.wait(delay)
        return 0

    def _register(self) -> None:
        harnesses = hostable_harnesses(self.ctx.config, self.ctx.env)
        self.spawner_id = self.client.register(
            self.options.name, self.options.repositories, harnesses
        )
        self.ctx.events.emit(
            "spawner.started",
            None,
            name=self.options.name,
            harnesses=harnesses,
            spawner_id=self.spawner_id,
        )

    def _watch(self) -> None:
        next_usage = time.monotonic() + self.options.transcript_interval
        while not self.stop.wait(self.options.watchdog_interval):
            try:
                self.watchdog.tick()
            except Exception:  # the watchdog must outlive any one bad look
                log.exception("watchdog tick failed")
            if self.ctx.models is None and time.monotonic() >= next_usage:
                next_usage = time.monotonic() + self.options.transcript_interval
                self._transcripts_read()

    def _transcripts_read(self) -> None:
        """Without a gateway, live sessions' usage is read from their transcripts now and
        then (only a transcript that grew is read again), so a budget weighs them as they
        run."""
        ctx = self.ctx
        for record in ctx.registry.all():
            if record.live and not record.standing:
                try:
                    report_ended(ctx.config, ctx.home, ctx.state_dir, ctx.events.emit, record)
                except Exception:  # one unreadable transcript must not end the look
                    log.exception("transcript usage of %s failed", record.work_item_id)

    # -- one job ----------------------------------------------------------------------------

    def _handle(self, job: ClaimedJob) -> None:
        beat_stop = threading.Event()
        beat = threading.Thread(target=self._heartbeat, args=(job, beat_stop), daemon=True)
        beat.start()
        try:
            ok, result, error = run_job(self.ctx, job)
        except NotHeld as exc:  # its lease lapsed: it is offered again, not ours to fail
            self._lost(job, exc)
            return
        except Exception as exc:  # a job must never take the loop down
            log.exception("job %s failed unexpectedly", job.id)
            ok, result, error = False, {}, f"{exc.__class__.__name__}: {exc}"
        finally:
            beat_stop.set()
            self._slots.release()
        self._report(job.id, ok, result, error)

    def _lost(self, job: ClaimedJob, exc: NotHeld) -> None:
        """The App says `job` is no longer this spawner's: no result is sent for it (one
        would fail a job that is offered again), only a warning said."""
        log.warning("job %s is no longer this spawner's: %s", job.id, exc)
        self.ctx.events.emit(
            "session.job_lost", job.work_item_id, level="warning", job=job.id, reason=str(exc)
        )

    def _heartbeat(self, job: ClaimedJob, done: threading.Event) -> None:
        interval = max(job.lease_seconds / 3, 1.0)
        while not done.wait(interval):
            try:
                self.client.heartbeat(job.id)
            except (AppUnavailable, Rejected, Unauthorized) as exc:
                log.warning("heartbeat for job %s failed: %s", job.id, exc)

    def _report(self, job_id: int, ok: bool, result: dict[str, Any], error: str | None) -> None:
        """Send the result until the App has it; a 4xx (job no longer ours) ends the attempt."""
        backoff = Backoff(cap=self.options.max_backoff)
        while True:
            try:
                self.client.result(job_id, ok, result, error)
                return
            except (Rejected, Unauthorized) as exc:
                log.warning("the App refused the result of job %s: %s", job_id, exc)
                return
            except AppUnavailable as exc:
                delay = backoff.next()
                log.warning("result of job %s not sent (%s); retrying in %.1fs", job_id, exc, delay)
                if self.stop.wait(delay):
                    log.warning("stopping with job %s unreported; it is offered again", job_id)
                    return
