"""What a spawner's session events change on a work item: its status (through the one
transition table) and the session facts the progress comment shows — which screen a stalled
session waits on, and how it ended, and the repository's set-up (`setup_notes`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from app import graph
from app.github import Services
from app.store import WorkItem
from app.workitems.flow.states import Happened, transition
from app.workitems.spend.spending import budget_line_of
from app.workitems.spend.usage import clocked, usage_line_of
from app.workitems.tell.endings import BUDGET_REASON, report_ending
from app.workitems.tell.notices import announce_moved, announce_stall
from app.workitems.tell.setup_notes import SETUP_EVENTS, apply_setup_event

STATUS_EVENTS = frozenset(
    {
        Happened.SESSION_SPAWNED,
        Happened.SESSION_RESPAWNED,
        Happened.SESSION_STALLED,
        Happened.SESSION_UNSTALLED,
        Happened.SESSION_EXITED,
    }
)


EVIDENCE_EVENT = "session.evidence"
STALL_KEYS = ("stall", "stall_hint", "stall_options", "stall_question", "stall_fingerprint")


def session_facts(
    name: str, fields: Mapping[str, Any], current: Mapping[str, Any]
) -> dict[str, Any]:
    """The item's session record after event `name` (pure)."""
    facts = dict(current)
    if name == Happened.SESSION_STALLED:
        screen = str(fields.get("screen") or "")[:64]
        fingerprint = str(fields.get("fingerprint") or "")[:64]
        if facts.get("stall") != screen or facts.get("stall_fingerprint", "") != fingerprint:
            facts["stalls"] = int(facts.get("stalls") or 0) + 1  # a new stall episode
        facts["stall"] = screen
        facts["stall_hint"] = str(fields.get("hint") or "")[:300]
        options = fields.get("options")
        facts["stall_options"] = (
            [str(o)[:200] for o in options][:9] if isinstance(options, list) else []
        )
        facts["stall_question"] = str(fields.get("question") or "")[:300]
        facts["stall_fingerprint"] = str(fields.get("fingerprint") or "")[:64]
    elif name in (
        Happened.SESSION_UNSTALLED,
        Happened.SESSION_SPAWNED,
        Happened.SESSION_RESPAWNED,
        Happened.SESSION_EXITED,
    ):
        for key in STALL_KEYS:
            facts.pop(key, None)
    if name == Happened.SESSION_EXITED:
        facts["exit_status"] = fields.get("exit_status")
    if name in (Happened.SESSION_SPAWNED, Happened.SESSION_RESPAWNED) and fields.get("sandbox"):
        facts["sandbox"] = str(fields["sandbox"])[:32]  # "none": shown as a warning
    if name in (Happened.SESSION_SPAWNED, Happened.SESSION_RESPAWNED) and fields.get("network"):
        facts["network"] = str(fields["network"])[:32]  # "host": shown as a warning
    return facts


def apply_session_event(
    services: Services, session: Session, item: WorkItem, name: str, fields: Mapping[str, Any]
) -> None:
    """Record a reported session event on `item` (inside the caller's transaction), and tell
    the issue when a stall starts or ends, or when the session ended short of review. What
    the spawner saw of the item's artifacts is kept as the session's `evidence`: the only
    evidence a phase move is taken on."""
    if name in SETUP_EVENTS:
        apply_setup_event(services, item, name, fields)
        return
    if name == EVIDENCE_EVENT:
        seen = graph.evidence_from(fields)
        if seen is not None:
            item.session = {**(item.session or {}), "evidence": graph.evidence_fields(seen)}
        return
    timed = clocked(item.session or {}, name, services.clock())
    if timed != (item.session or {}):
        item.session = timed
    if name not in STATUS_EVENTS:
        budget = (
            budget_line_of(services, session, item) if fields.get("reason") == BUDGET_REASON else ""
        )
        usage = usage_line_of(session, item, services.config, services.clock())
        report_ending(services, item, name, fields, usage, budget)
        return
    before = dict(item.session or {})
    transition(item, name)
    facts = session_facts(name, fields, before)
    if facts != before:
        item.session = facts
    episode = int(facts.get("stalls") or 0)
    if name == Happened.SESSION_STALLED and episode != int(before.get("stalls") or 0):
        announce_stall(services, session, item, episode, fields)
    elif before.get("stall") and not facts.get("stall") and name == Happened.SESSION_UNSTALLED:
        announce_moved(services, item, episode, str(before["stall"]))
    usage = usage_line_of(session, item, services.config, services.clock())
    report_ending(services, item, name, fields, usage)
