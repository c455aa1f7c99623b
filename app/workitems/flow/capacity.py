"""A spawner's room for sessions (`routing.maxSessions`) and the queue of executed items
waiting for it.

The App hands out spawn jobs, so the App enforces the limit: a spawner says its limit when
it long-polls, and the App offers it a spawn only while the sessions it holds — items whose
session runs or stalls there, and spawns it has claimed but not finished — are fewer.
A session that ends (exited, stopped, done) stops counting as soon as the App records it,
and a waiting poll looks again within seconds, so the next item in line launches then.

Items whose spawn job waits keep their place in execute order: `renumber` writes each one's
`(k, n)` into its session facts, so its progress comment says `queued (k of n)` and is
edited whenever the line moves (an execute joins it, a spawner takes its head, an issue
closes while waiting).
"""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.store import Job, JobKind, JobState, WorkItem, WorkItemStatus

S = WorkItemStatus
# Statuses in which an item's session runs on its spawner (SPAWNING counts by its claim).
HOLDING = (S.RUNNING, S.STALLED)
QUEUE_KEY = "queued"  # in an item's session facts: [position, length]
HELD_KEY = "held"  # in a waiting item's session facts: why a spend cap holds it
LINE_LOCK = 0x74686C696E65  # PostgreSQL advisory lock of the line's renumbering ("thline")


def sessions_held(session: Session, spawner_id: int) -> int:
    """How many work-item sessions the App counts on `spawner_id`: running or stalled items
    it hosts, and items whose spawn it has claimed and not yet reported."""
    starting = session.scalars(
        select(Job.work_item_id).where(
            Job.kind == JobKind.SPAWN,
            Job.state == JobState.CLAIMED,
            Job.spawner_id == spawner_id,
        )
    ).all()
    hosted = session.execute(
        select(WorkItem.id, WorkItem.session).where(WorkItem.state.in_(HOLDING))
    ).all()
    held = {
        work_item_id
        for work_item_id, facts in hosted
        if (facts or {}).get("spawner_id") == spawner_id
    }
    return len(held | set(starting))


def has_room(session: Session, spawner_id: int, limit: int | None) -> bool:
    """Whether a spawner whose limit is `limit` (None: none) may start another session."""
    return limit is None or sessions_held(session, spawner_id) < limit


def waiting_items(session: Session) -> list[WorkItem]:
    """Executed items whose spawn job no spawner has taken yet, in execute order."""
    order = session.execute(
        select(Job.work_item_id, func.min(Job.id))
        .where(Job.kind == JobKind.SPAWN, Job.state == JobState.QUEUED)
        .group_by(Job.work_item_id)
        .order_by(func.min(Job.id))
    ).all()
    ids = [work_item_id for work_item_id, _ in order]
    if not ids:
        return []
    rows = session.scalars(
        select(WorkItem).where(WorkItem.id.in_(ids), WorkItem.state == S.FROZEN)
    ).all()
    by_id = {row.id: row for row in rows}
    return [by_id[work_item_id] for work_item_id in ids if work_item_id in by_id]


def hold_line(session: Session) -> None:
    """Take the line's lock until the caller's transaction ends (PostgreSQL; SQLite has one
    writer at a time anyway). Taking it again in the same transaction is free.

    Renumbering rewrites every waiting item, so the lock order is the line first, then any
    waiting item's row: a transaction that locks or writes a waiting item and renumbers
    afterwards must take the line before it touches that item (`stop_on_close`, a spawn's
    handover). Otherwise it holds the item while it waits for the line, and a renumbering
    that holds the line waits for the item: PostgreSQL breaks that deadlock only after its
    `deadlock_timeout`, failing one of them. An execute may lock its item first: that item
    joins the line only when the execute commits, so no renumbering waits for it."""
    if session.get_bind().dialect.name == "postgresql":
        with session.no_autoflush:
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LINE_LOCK})


def renumber(session: Session, leaving: WorkItem | None = None) -> None:
    """Write every waiting item's place in line (inside the caller's transaction); `leaving`
    is an item that just left the line (its spawn was taken, or it closed).

    Renumbering rewrites many items, so two at once (spawns claimed together, by threads or
    replicas) would each lock rows the other writes next and deadlock. One renumbering at a
    time holds the line (`hold_line`) until its transaction ends, taken before this call
    writes any item (`leaving` too); the next one then reads the line as the last one left
    it."""
    hold_line(session)
    if leaving is not None and {QUEUE_KEY, HELD_KEY} & set(leaving.session or {}):
        facts = dict(leaving.session or {})
        facts.pop(QUEUE_KEY, None)
        facts.pop(HELD_KEY, None)
        leaving.session = facts
    line = waiting_items(session)
    for position, item in enumerate(line, start=1):
        place = [position, len(line)]
        if (item.session or {}).get(QUEUE_KEY) != place:
            item.session = {**(item.session or {}), QUEUE_KEY: place}


def place_in_line(facts: dict[str, object] | None) -> tuple[int, int] | None:
    """The `(k, n)` recorded in an item's session facts, when it is well formed (pure)."""
    place = (facts or {}).get(QUEUE_KEY)
    if (
        isinstance(place, list)
        and len(place) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in place)
        and 1 <= place[0] <= place[1]
    ):
        return int(place[0]), int(place[1])
    return None


def held_words(facts: dict[str, object] | None) -> str:
    """Why a spend cap holds a waiting item, as recorded in its session facts ("" if none)."""
    words = (facts or {}).get(HELD_KEY)
    return words[:200] if isinstance(words, str) else ""
