"""What a spawner's session events change on a work item: its status (through the one
transition table) and the session facts the progress comment shows — which screen a stalled
session waits on, and how it ended."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.store.tables import WorkItem
from app.workitems.states import Happened, transition

STATUS_EVENTS = frozenset(
    {
        Happened.SESSION_SPAWNED,
        Happened.SESSION_RESPAWNED,
        Happened.SESSION_STALLED,
        Happened.SESSION_UNSTALLED,
        Happened.SESSION_EXITED,
    }
)


def session_facts(
    name: str, fields: Mapping[str, Any], current: Mapping[str, Any]
) -> dict[str, Any]:
    """The item's session record after event `name` (pure)."""
    facts = dict(current)
    if name == Happened.SESSION_STALLED:
        facts["stall"] = str(fields.get("screen") or "")[:64]
        facts["stall_hint"] = str(fields.get("hint") or "")[:300]
    elif name in (Happened.SESSION_UNSTALLED, Happened.SESSION_SPAWNED, Happened.SESSION_RESPAWNED):
        facts.pop("stall", None)
        facts.pop("stall_hint", None)
    if name == Happened.SESSION_EXITED:
        facts.pop("stall", None)
        facts.pop("stall_hint", None)
        facts["exit_status"] = fields.get("exit_status")
    return facts


def apply_session_event(item: WorkItem, name: str, fields: Mapping[str, Any]) -> None:
    """Record a reported session event on `item` (inside the caller's transaction)."""
    if name not in STATUS_EVENTS:
        return
    transition(item, name)
    facts = session_facts(name, fields, item.session or {})
    if facts != (item.session or {}):
        item.session = facts
