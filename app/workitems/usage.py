"""A work item's model usage: the counts a spawner's gateway reports (`session.usage`, what
was used since its last report) added to the item's totals, and read back for `/status`.

Each report is added once (the event's id is recorded once, in `fleet/reports.py`); a field
that is not a count is taken as zero, so one malformed report never poisons the totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import OperatorConfig
from app.protocol import USAGE_EVENT, USAGE_FIELDS
from app.store.tables import WorkItem, WorkItemUsage
from app.workitems.costs import cost_usd, price_for, usage_line

__all__ = ["USAGE_EVENT", "add_usage", "reported_counts", "usage_line_of", "usage_of"]

FIELDS = USAGE_FIELDS
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


def add_usage(session: Session, work_item: str, counts: Mapping[str, int]) -> None:
    """Add `counts` to `work_item`'s totals, inside the caller's transaction (one statement,
    so two replicas adding at once both count)."""
    if not any(counts.values()):
        return
    add = {name: getattr(WorkItemUsage, name) + counts.get(name, 0) for name in FIELDS}
    changed = session.execute(
        update(WorkItemUsage).where(WorkItemUsage.work_item == work_item).values(**add)
    )
    if getattr(changed, "rowcount", 0):
        return
    try:
        with session.begin_nested():
            session.add(WorkItemUsage(work_item=work_item, **dict(counts)))
    except IntegrityError:  # another writer created the row first: add to it
        session.execute(
            update(WorkItemUsage).where(WorkItemUsage.work_item == work_item).values(**add)
        )


def usage_of(session: Session, work_items: Iterable[str]) -> dict[str, dict[str, int]]:
    """Each item's totals (every count zero for an item that used nothing yet)."""
    ids = list(work_items)
    found = (
        {
            row.work_item: {name: int(getattr(row, name) or 0) for name in FIELDS}
            for row in session.scalars(
                select(WorkItemUsage).where(WorkItemUsage.work_item.in_(ids))
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


def usage_line_of(session: Session, item: WorkItem, config: OperatorConfig) -> str:
    """The progress comment's usage line for `item`, or "" while it has used nothing."""
    counts = usage_of(session, [item.id])[item.id]
    if not any(counts.values()):
        return ""
    frozen = item.frozen if isinstance(item.frozen, dict) else None
    model = str(frozen.get("model") or "") if frozen else ""
    return usage_line(counts, priced(config, model, counts))
