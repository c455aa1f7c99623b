"""What the status page and `/status` read from the database: small functions, one per
section, each returning plain values (dataclasses, dicts), so templates hold no queries and
the JSON and the page agree."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.fleet import is_dead
from app.store import (
    Delivery,
    DeliveryLogState,
    Event,
    InboxState,
    Installation,
    Job,
    JobState,
    Repository,
    SlackOutbox,
    Spawner,
    WorkItem,
    WorkItemStatus,
    aware,
)
from app.web.present import DEAD_AFTER, Health, session_health
from app.workitems import stopped_by_budget, wall_minutes

WORK_ITEMS_SHOWN = 100
STOPPED_BY_BUDGET = "stopped: budget"  # a stopped item's status when its budget stopped it
EVENTS_SHOWN = 100
# Optional work item facts other parts of the App may record; shown as "—" until they do.
PHASE_FIELDS = ("phase", "current_node")


def counts(session: Session, column: InstrumentedAttribute[str]) -> dict[str, int]:
    rows = session.execute(select(column, func.count()).group_by(column)).all()
    return {str(value): int(count) for value, count in rows}


@dataclass(frozen=True)
class InstallationRow:
    id: int
    account: str
    kind: str
    selection: str
    suspended: bool
    repositories: list[str]


def installations(session: Session) -> list[InstallationRow]:
    repos: dict[int, list[str]] = {}
    for inst_id, name in session.execute(
        select(Repository.installation_id, Repository.full_name).order_by(Repository.full_name)
    ):
        repos.setdefault(int(inst_id), []).append(str(name))
    return [
        InstallationRow(
            id=i.id,
            account=i.account_login,
            kind=i.account_type or "",
            selection=i.repository_selection or "",
            suspended=i.suspended,
            repositories=repos.get(i.id, []),
        )
        for i in session.scalars(select(Installation).order_by(Installation.account_login))
    ]


@dataclass(frozen=True)
class WorkItemRow:
    id: str
    title: str
    url: str
    status: str
    health: Health
    phase: str | None
    harness: str | None
    model: str | None
    effort: str | None
    frozen_by: str | None
    since: datetime | None
    pull_request: str | None  # its page
    spawner: str | None
    pull_number: int | None = None
    minutes: float | None = None  # its sessions' wall-clock time, None before any launched


def _first_text(item: WorkItem, facts: dict[str, Any], names: Sequence[str]) -> str | None:
    """A fact that may live in a column or in the session record, when anything recorded it."""
    for name in names:
        value = getattr(item, name, None) or facts.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def web_page(url: Any) -> str:
    """`url` when it is a web page's address (http or https), else "": nothing recorded on
    an item becomes a `javascript:` link."""
    if isinstance(url, str) and url.startswith(("https://", "http://")) and " " not in url:
        return url
    return ""


def _pull(item: WorkItem) -> tuple[int | None, str | None]:
    """The item's pull request: its number and page, once one is linked."""
    pr = item.pull_request if isinstance(item.pull_request, dict) else {}
    number = pr.get("number")
    page = web_page(pr.get("html_url")) or None
    return (number if isinstance(number, int) else None), page


def _choice(frozen: dict[str, Any] | None, key: str) -> str | None:
    if frozen is None:
        return None  # not frozen yet
    value = frozen.get(key)
    return value if isinstance(value, str) and value else "default"


def _stalls(session: Session, item_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The newest `session.stalled` event of each item (what screen it waits at)."""
    ids = list(item_ids)
    if not ids:
        return {}
    rows = session.scalars(
        select(Event)
        .where(Event.event == "session.stalled", Event.work_item_id.in_(ids))
        .order_by(Event.id.desc())
    )
    latest: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.work_item_id is not None and row.work_item_id not in latest:
            latest[row.work_item_id] = dict(row.data or {})
    return latest


# Items whose session is (or may be) on a devbox: listed first whatever their number, so a
# flood of other items never hides a live or unconfirmed session.
LIVE_STATES = (
    WorkItemStatus.SPAWNING,
    WorkItemStatus.RUNNING,
    WorkItemStatus.STALLED,
    WorkItemStatus.FROZEN,
)


def _listed(session: Session, limit: int, state: str) -> list[WorkItem]:
    """The items the page lists: with `state`, the most recent `limit` in it; else every
    item in a live state, then the most recently updated others up to `limit`."""
    recent = WorkItem.updated_at.desc()
    if state:
        return list(
            session.scalars(
                select(WorkItem).where(WorkItem.state == state).order_by(recent).limit(limit)
            )
        )
    live = list(
        session.scalars(select(WorkItem).where(WorkItem.state.in_(LIVE_STATES)).order_by(recent))
    )
    others = select(WorkItem).where(WorkItem.state.not_in(LIVE_STATES)).order_by(recent)
    return live + list(session.scalars(others.limit(limit)))


def work_items_total(session: Session, state: str = "") -> int:
    """How many items there are (in `state`, when given): the page says how many it left out."""
    query = select(func.count()).select_from(WorkItem)
    if state:
        query = query.where(WorkItem.state == state)
    return int(session.scalar(query) or 0)


def work_items(
    session: Session,
    now: datetime,
    limit: int = WORK_ITEMS_SHOWN,
    state: str = "",
    dead_after: timedelta = DEAD_AFTER,
) -> list[WorkItemRow]:
    """The page's work item rows (see `_listed` for which and in what order); a spawner
    silent for `dead_after` counts as dead."""
    items = _listed(session, limit, state)
    stalls = _stalls(session, (i.id for i in items if i.state == WorkItemStatus.STALLED))
    seen = {s.id: s.last_seen for s in session.scalars(select(Spawner))}
    rows: list[WorkItemRow] = []
    for item in items:
        facts = dict(item.session or {})
        frozen = item.frozen if isinstance(item.frozen, dict) else None
        stall = stalls.get(item.id, {})
        spawner_id = facts.get("spawner_id")
        status = STOPPED_BY_BUDGET if stopped_by_budget(item) else item.state
        health = session_health(
            status,
            stall_screen=stall.get("screen"),
            stall_hint=stall.get("hint"),
            failure=str(facts["failure"]) if facts.get("failure") else None,
            spawner=facts.get("spawner"),
            spawner_seen=seen.get(spawner_id) if isinstance(spawner_id, int) else None,
            setup=facts["setup"] if isinstance(facts.get("setup"), dict) else None,
            now=now,
            dead_after=dead_after,
        )
        decision = ((frozen or {}).get("decisions") or {}).get("phase-selection") or {}
        pull_number, pull_page = _pull(item)
        rows.append(
            WorkItemRow(
                id=item.id,
                title=item.title,
                url=web_page(item.html_url),
                status=status,
                health=health,
                phase=_first_text(item, facts, PHASE_FIELDS),
                harness=_choice(frozen, "harness"),
                model=_choice(frozen, "model"),
                effort=_choice(frozen, "effort"),
                frozen_by=decision.get("by"),
                since=aware(item.updated_at),
                pull_request=pull_page,
                pull_number=pull_number,
                spawner=facts.get("spawner"),
                minutes=wall_minutes(facts, now),
            )
        )
    return rows


@dataclass(frozen=True)
class SpawnerRow:
    id: int
    name: str
    serves: list[str]
    allowed: list[str]
    harnesses: list[str]
    version: str | None
    last_seen: datetime | None
    dead: bool = False  # silent past the dead window


def spawners(
    session: Session, now: datetime, dead_after: timedelta = DEAD_AFTER
) -> list[SpawnerRow]:
    return [
        SpawnerRow(
            id=s.id,
            name=s.name,
            serves=[str(r) for r in s.serves] if s.serves is not None else [],
            allowed=[str(r) for r in s.repositories or []],
            harnesses=[str(h) for h in s.harnesses or []],
            version=s.version,
            last_seen=aware(s.last_seen),
            dead=is_dead(s.last_seen, now, dead_after),
        )
        for s in session.scalars(select(Spawner).order_by(Spawner.name, Spawner.id))
    ]


@dataclass(frozen=True)
class JobRow:
    id: int
    kind: str
    work_item_id: str
    state: str
    spawner: str | None
    attempts: int
    lease_until: datetime | None
    created_at: datetime | None


def pending_jobs(session: Session) -> list[JobRow]:
    names = {s.id: s.name for s in session.scalars(select(Spawner))}
    pending = (JobState.QUEUED, JobState.CLAIMED)
    query = select(Job).where(Job.state.in_(pending)).order_by(Job.id)
    return [
        JobRow(
            id=j.id,
            kind=j.kind,
            work_item_id=j.work_item_id,
            state=j.state,
            spawner=names.get(j.spawner_id) if j.spawner_id is not None else None,
            attempts=j.attempts,
            lease_until=aware(j.lease_until),
            created_at=aware(j.created_at),
        )
        for j in session.scalars(query)
    ]


@dataclass(frozen=True)
class DeliveryRow:
    delivery: str
    event: str
    action: str | None
    attempts: int
    error: str | None
    received_at: datetime | None


def parked_deliveries(session: Session, limit: int = 50) -> list[DeliveryRow]:
    query = (
        select(Delivery)
        .where(Delivery.state == InboxState.PARKED)
        .order_by(Delivery.id.desc())
        .limit(limit)
    )
    return [
        DeliveryRow(
            d.delivery_id, d.event, d.action, d.attempts, d.last_error, aware(d.received_at)
        )
        for d in session.scalars(query)
    ]


@dataclass(frozen=True)
class EventRow:
    id: int
    ts: datetime | None
    event: str
    work_item_id: str | None
    details: str


def recent_events(
    session: Session, prefix: str = "", work_item_id: str = "", limit: int = EVENTS_SHOWN
) -> list[EventRow]:
    """The newest events, optionally only names starting with `prefix` or of one item."""
    query = select(Event).order_by(Event.id.desc()).limit(limit)
    if prefix:
        query = query.where(Event.event.startswith(prefix, autoescape=True))
    if work_item_id:
        query = query.where(Event.work_item_id == work_item_id)
    return [
        EventRow(
            id=e.id,
            ts=aware(e.ts),
            event=e.event,
            work_item_id=e.work_item_id,
            details=json.dumps(e.data or {}, default=str, separators=(", ", ": "))[:300],
        )
        for e in session.scalars(query)
    ]


def status_counts(session: Session) -> dict[str, dict[str, int]]:
    """Rows by state in each table the App works from (the top of `/status`)."""
    return {
        "work_items": counts(session, WorkItem.state),
        "inbox": counts(session, Delivery.state),
        "jobs": counts(session, Job.state),
        "slack_outbox": counts(session, SlackOutbox.state),
    }


@dataclass(frozen=True)
class LogPass:
    """The last pass over GitHub's delivery log: when, what it recovered, and whether the
    next waits for GitHub (a rate limit) or the budget."""

    at: datetime | None
    counts: dict[str, Any]
    waiting_until: datetime | None


def delivery_log(session: Session) -> LogPass | None:
    row = session.get(DeliveryLogState, "github")
    if row is None or not row.last_pass:
        return None
    record = dict(row.last_pass)
    at = record.pop("at", None)
    return LogPass(
        at=datetime.fromisoformat(at) if isinstance(at, str) else None,
        counts=record,
        waiting_until=aware(row.not_before),
    )
