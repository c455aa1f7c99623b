"""Whether a spawner is alive, and what its death does to the sessions it hosted.

A spawner heartbeats every few seconds (`/spawner/v1/heartbeat`, naming the sessions it
runs); each beat writes `last_seen`. One sweep, run by every App process that runs inbox
workers, counts a spawner silent for `THE_LOOP_SPAWNER_DEAD_SECONDS` as dead: its running
and stalled items turn `lost` through the table in `app.workitems.flow.states`, and their
progress comment (and Slack thread) follow that one status. A lost session whose spawner
heartbeats again naming it returns to running; otherwise it waits for a person's execute.
The arithmetic is pure (`is_dead`, `look_due`); the sweep and the beat are the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.fleet.tokens import hosted_items, renew_session_tokens
from app.github import Services
from app.retry import WakeLoop
from app.store import (
    Job,
    JobKind,
    JobState,
    Sessions,
    Spawner,
    WorkItem,
    WorkItemStatus,
    aware,
)
from app.workitems import HOSTED, Happened, lock_work_item, transition, weigh_time

log = logging.getLogger(__name__)

LOOK_EVERY = timedelta(seconds=60)  # session tokens renewed, minutes budgets weighed
MAX_REPORTED = 1000  # session ids one heartbeat may name (more are ignored)


def is_dead(last_seen: datetime | None, now: datetime, dead_after: timedelta) -> bool:
    """Whether a spawner last heard at `last_seen` counts as dead at `now` (pure). One never
    heard hosts nothing, so it is not dead, only absent."""
    seen = aware(last_seen)
    return seen is not None and now - seen > dead_after


def look_due(last_seen: datetime | None, now: datetime, every: timedelta = LOOK_EVERY) -> bool:
    """Whether a call at `now`, from a spawner last heard at `last_seen`, is its once-per-
    `every` look (pure): the first call, or the first in a new `every`-long slice of time.
    Slices, not a gap since the last call: a spawner heard every few seconds still gets its
    look once per slice, without a second timestamp to keep."""
    seen = aware(last_seen)
    if seen is None:
        return True
    size = every.total_seconds()
    return now - seen >= every or int(seen.timestamp() // size) != int(now.timestamp() // size)


def note_seen(services: Services, session: Session, spawner: Spawner, now: datetime) -> None:
    """A call from `spawner` at `now` (a heartbeat or a poll): `last_seen` is written. Once
    per `LOOK_EVERY` it is also its look: its sessions' tokens are renewed and their minutes
    budget weighed (a budget runs out while a session idles too)."""
    due = look_due(spawner.last_seen, now)
    spawner.last_seen = now
    if due:
        hosted = hosted_items(session, spawner)
        renew_session_tokens(session, hosted, now)
        weigh_time(services, session, hosted)


def _starting(session: Session, spawner: Spawner) -> set[str]:
    """The items whose spawn job `spawner` holds: their session may run before the job's
    result (which names the spawner on the item) is in."""
    held = select(Job.work_item_id).where(
        Job.kind == JobKind.SPAWN, Job.state == JobState.CLAIMED, Job.spawner_id == spawner.id
    )
    return set(session.scalars(held).all())


def sessions_on(session: Session, spawner: Spawner) -> list[str]:
    """The items whose session `spawner` runs: those it reported, and those it is starting."""
    return sorted(set(hosted_items(session, spawner)) | _starting(session, spawner))


def _hosts(session: Session, spawner: Spawner, item: WorkItem) -> bool:
    on = (item.session or {}).get("spawner_id")
    return on == spawner.id or (on is None and item.id in _starting(session, spawner))


def revive(
    services: Services, session: Session, spawner: Spawner, reported: Iterable[object]
) -> list[str]:
    """The lost items among `reported` (the sessions `spawner` says it runs) that it hosted:
    they are running again. Returns their ids."""
    names = [str(name)[:256] for name in list(reported)[:MAX_REPORTED] if isinstance(name, str)]
    if not names:
        return []
    lost = session.scalars(
        select(WorkItem.id).where(WorkItem.id.in_(names), WorkItem.state == WorkItemStatus.LOST)
    ).all()
    back: list[str] = []
    for work_item_id in lost:
        item = lock_work_item(session, work_item_id)
        if item is None or not _hosts(session, spawner, item):
            continue
        if transition(item, Happened.SESSION_ALIVE) is not None:
            back.append(item.id)
            services.events.emit("session.found", item.id, session=session, spawner=spawner.name)
    if back:
        log.info("spawner %s is back with lost sessions %s: running again", spawner.name, back)
    return back


def sweep(
    services: Services, sessions: Sessions, now: datetime, dead_after: timedelta
) -> dict[str, list[str]]:
    """Mark the items of every dead spawner lost (the one place a spawner's death is
    decided); returns, per spawner counted dead, the items lost now (often none). A beat
    that lands while this runs is not lost either way: its next one names the sessions it
    runs, and `revive` brings them back."""
    cutoff = now - dead_after
    with sessions() as session:
        silent = session.scalars(
            select(Spawner.id).where(Spawner.last_seen.is_not(None), Spawner.last_seen < cutoff)
        ).all()
    dead: dict[str, list[str]] = {}
    for spawner_id in silent:
        with sessions() as session, session.begin():
            spawner = session.get(Spawner, spawner_id, with_for_update=True)
            if spawner is None or not is_dead(spawner.last_seen, now, dead_after):
                continue  # it spoke since, or its token was revoked
            dead.setdefault(spawner.name, []).extend(_lose(services, session, spawner))
    return dead


def _lose(services: Services, session: Session, spawner: Spawner) -> list[str]:
    """Turn the running sessions of dead `spawner` lost; returns their items."""
    candidates = sessions_on(session, spawner)
    query = select(WorkItem.id, WorkItem.state).where(WorkItem.id.in_(candidates))
    states = {work_item_id: state for work_item_id, state in session.execute(query)}
    lost: list[str] = []
    for work_item_id in [i for i in candidates if states.get(i) in HOSTED]:
        item = lock_work_item(session, work_item_id)
        if item is not None and transition(item, Happened.SPAWNER_DEAD) is not None:
            lost.append(item.id)
            services.events.emit(
                "session.lost",
                item.id,
                session=session,
                level="warning",
                spawner=spawner.name,
                last_seen=str(spawner.last_seen),
            )
    return lost


class SpawnerSweep(WakeLoop):
    """Runs `sweep` every few seconds in an App process with inbox workers, and says once
    (per process) of each spawner it finds dead that it is, with a warning line. It judges
    no one in its first dead window: while the App was down nobody could reach it, and the
    spawners' first beats after it came back are still on their way."""

    thread_name = "spawner-sweep"

    def __init__(
        self,
        services: Services,
        sessions: Sessions,
        dead_after: timedelta,
        clock: Callable[[], datetime],
    ) -> None:
        super().__init__(poll=min(max(dead_after.total_seconds() / 6, 0.5), 5.0))
        self.services = services
        self.sessions = sessions
        self.dead_after = dead_after
        self.clock = clock
        self._told: set[str] = set()
        self._since: datetime | None = None  # the first look of this process

    def run_once(self) -> bool:
        now = self.clock()
        self._since = self._since or now
        if now - self._since <= self.dead_after:
            return False
        dead = sweep(self.services, self.sessions, now, self.dead_after)
        for name, lost in dead.items():
            if name in self._told and not lost:
                continue
            self._told.add(name)
            log.warning(
                "spawner %s marked dead: silent for more than %ds; sessions lost: %s",
                name,
                self.dead_after.total_seconds(),
                ", ".join(lost) or "none",
            )
            self.services.events.emit("spawner.dead", spawner=name, lost=lost, level="warning")
        self._told &= set(dead)  # one that came back is told about again when it dies again
        return False
