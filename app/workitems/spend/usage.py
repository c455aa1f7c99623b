"""A work item's model usage: the counts a spawner's gateway reports (`session.usage`, what
was used since its last report) added to the item's totals, and read back for `/status`.

Each report is added once (the event's id is recorded once, in `fleet/reports.py`); a field
that is not a count is taken as zero, so one malformed report never poisons the totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import OperatorConfig
from app.protocol import USAGE_EVENT, USAGE_FIELDS
from app.store import WorkItem, WorkItemUsage
from app.workitems.spend.costs import cost_usd, price_for, usage_line
from app.workitems.spend.route_usage import routes_text

__all__ = [
    "USAGE_EVENT",
    "add_usage",
    "clocked",
    "reported_counts",
    "usage_line_of",
    "usage_of",
    "wall_minutes",
]

FIELDS = USAGE_FIELDS
# A session's wall clock, kept in the item's session facts: launch to exit or stop.
LAUNCH_EVENTS = frozenset({"session.spawned", "session.respawned"})
END_EVENTS = frozenset({"session.exited", "session.stopped"})
OPEN_KEY = "launched_at"
WALL_KEY = "wall_seconds"
CLOCK_KEYS = (OPEN_KEY, WALL_KEY)
# No one report can be this large; a bigger number is a broken or hostile spawner's.
MAX_COUNT = 10**12


def reported_counts(fields: Mapping[str, Any]) -> dict[str, int]:
    """The counts of a `session.usage` event (pure): whole numbers in range, else zero."""
    counts: dict[str, int] = {}
    for name in FIELDS:
        value = fields.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT:
            counts[name] = value
        else:
            counts[name] = 0
    return counts


def add_usage(session: Session, work_item_id: str, counts: Mapping[str, int]) -> None:
    """Add `counts` to `work_item_id`'s totals, inside the caller's transaction (one statement,
    so two replicas adding at once both count)."""
    if not any(counts.values()):
        return
    add = {name: getattr(WorkItemUsage, name) + counts.get(name, 0) for name in FIELDS}
    changed = session.execute(
        update(WorkItemUsage).where(WorkItemUsage.work_item_id == work_item_id).values(**add)
    )
    if getattr(changed, "rowcount", 0):
        return
    try:
        with session.begin_nested():
            session.add(WorkItemUsage(work_item_id=work_item_id, **dict(counts)))
    except IntegrityError:  # another writer created the row first: add to it
        session.execute(
            update(WorkItemUsage).where(WorkItemUsage.work_item_id == work_item_id).values(**add)
        )


def usage_of(session: Session, work_items: Iterable[str]) -> dict[str, dict[str, int]]:
    """Each item's totals (every count zero for an item that used nothing yet)."""
    ids = list(work_items)
    found = (
        {
            row.work_item_id: {name: int(getattr(row, name) or 0) for name in FIELDS}
            for row in session.scalars(
                select(WorkItemUsage).where(WorkItemUsage.work_item_id.in_(ids))
            )
        }
        if ids
        else {}
    )
    return {item: found.get(item, dict.fromkeys(FIELDS, 0)) for item in ids}


def priced(config: OperatorConfig, model: str | None, counts: Mapping[str, int]) -> float | None:
    """What `counts` cost at the price of `model` (the item's frozen choice), or None when
    no model was chosen or none is priced."""
    price = price_for(config, model) if model else None
    return cost_usd(counts, price) if price is not None else None


def usage_line_of(
    session: Session, item: WorkItem, config: OperatorConfig, now: datetime | None = None
) -> str:
    """The progress comment's usage line for `item`, or "" while it has used nothing; with
    `now`, a session still running counts its time up to then."""
    counts = usage_of(session, [item.id])[item.id]
    routes = routes_text(item.session or {})  # its credential routes' requests, if any
    if not any(counts.values()):
        return f"**Usage:** {routes}" if routes else ""
    frozen = item.frozen if isinstance(item.frozen, dict) else None
    model = str(frozen.get("model") or "") if frozen else ""
    minutes = wall_minutes(item.session or {}, now)
    line = usage_line(counts, priced(config, model, counts), minutes)
    return f"{line} · {routes}" if routes else line


def _moment(value: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def clocked(facts: Mapping[str, Any], event: str, now: datetime) -> dict[str, Any]:
    """The session facts after `event`, with the item's wall-clock time kept (pure): a launch
    opens a session's clock (closing one still open), an exit or stop adds its time to
    `wall_seconds`."""
    out = dict(facts)
    if event not in LAUNCH_EVENTS and event not in END_EVENTS:
        return out
    opened = _moment(out.pop(OPEN_KEY, None)) if out.get(OPEN_KEY) else None
    if opened is not None:
        spent = max(0.0, (now - opened).total_seconds())
        out[WALL_KEY] = float(out.get(WALL_KEY) or 0) + spent
    if event in LAUNCH_EVENTS:
        out[OPEN_KEY] = now.isoformat()
    return out


def wall_minutes(facts: Mapping[str, Any], now: datetime | None) -> float | None:
    """Every session's wall-clock minutes, the open one up to `now`; None when none ran."""
    if WALL_KEY not in facts and OPEN_KEY not in facts:
        return None
    seconds = float(facts.get(WALL_KEY) or 0)
    opened = _moment(facts.get(OPEN_KEY)) if facts.get(OPEN_KEY) else None
    if opened is not None and now is not None:
        seconds += max(0.0, (now - opened).total_seconds())
    return seconds / 60


TOKEN_KINDS = FIELDS[:4]  # the token counts (no requests, no tool calls)


def by_choice(
    rows: Iterable[tuple[Mapping[str, int], Any, Any]], config: OperatorConfig
) -> dict[tuple[str, str], tuple[dict[str, int], float | None]]:
    """Counts and cost summed by (harness, model) over items' `(counts, frozen, session
    facts)` (pure): the frozen choice's names, "default" where none was chosen; the cost is
    None while no item of that pair had a price."""
    out: dict[tuple[str, str], tuple[dict[str, int], float | None]] = {}
    for counts, frozen, facts in rows:
        chosen = frozen if isinstance(frozen, dict) else {}
        ran = facts if isinstance(facts, dict) else {}
        harness = str(ran.get("harness") or chosen.get("harness") or "default")[:64]
        model = str(chosen.get("model") or "")[:64]
        total, dollars = out.get((harness, model or "default"), ({}, None))
        total = {name: total.get(name, 0) + int(counts.get(name, 0) or 0) for name in FIELDS}
        cost = priced(config, model, counts)
        if cost is not None:
            dollars = (dollars or 0.0) + cost
        out[(harness, model or "default")] = (total, dollars)
    return out
