"""Events a spawner reports: appended to the App's audit trail, mirrored, and used to keep a
work item's status honest (a session waiting on a keypress is `stalled`, not `running`).

A batch is taken event by event: a refused event gets its reason while the others are kept.
A spawner reports only what a spawner sees — its sessions, workspaces and standing
sessions, its start, its configuration and (when it serves every repository) model
verdicts — and only about work items the App knows in repositories it serves, or about its
own standing sessions. The App's own event names (`gate.*`, `job.*`, `webhook.*`,
`workitem.*`, …) are refused, and so is a client-set `ts`: every record carries the time
the App received it (the spawner's own clock may come as `reported_ts`). An event carrying
an `id` is recorded once however often the spawner resends it. Each accepted event about a
work item (but `session.exited` and `session.usage`) renews its session tokens; a
`session.usage` event's counts are added to the item's totals, a `session.routes` event's
to its credential routes' counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.config import NAME_RE
from app.fleet.tokens import (
    ANY_REPOSITORY,
    renew_session_tokens,
    revoke_session_tokens,
    scope_of,
    serves,
)
from app.github import Services
from app.protocol import ROUTES_EVENT, SPAWNER_EVENTS
from app.store import ModelVerdict, Once, Spawner, WorkItem, WorkItemStatus, claimed_jobs
from app.workitems import (
    USAGE_EVENT,
    add_route_counts,
    add_usage,
    announce_refusal,
    apply_session_event,
    check_spending,
    lock_work_item,
    record_spend,
    reported_counts,
    usage_changed,
)

EVENT_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
VERDICT_TOKEN_RE = re.compile(r"^(model|effort)-[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
VERDICTS = frozenset({"ok", "refused", "unknown"})
MAX_BATCH = 500
MAX_EVENT_BYTES = 64 * 1024
# Mirrored from the job result instead, where the App knows the comment it answers; usage
# is a count, shown with the item, never a message of its own; what the spawner sees of a
# checkout's artifacts is the App's to act on, not news.
NOT_MIRRORED = frozenset(
    {
        "session.delivered",
        "session.evidence",
        USAGE_EVENT,
        # A set-up's course is the progress comment's (mirrored with it); its failure is news.
        "session.setup_started",
        "session.setup_running",
        "session.setup_finished",
        "session.setup_unkept",
        ROUTES_EVENT,
        # Noticed once per host by `egress`, with its Allow button; a refusal a try is noise.
        "session.egress_refused",
    }
)
# Reported after a session ended too (its last answers): no sign that the session lives.
NOT_RENEWING = frozenset({"session.exited", USAGE_EVENT, ROUTES_EVENT})
# What the App itself records or mirrors under a spawner's namespace: never a spawner's.
APP_NAMES = frozenset(
    {
        "session.spawn_deferred",
        "session.spawn_failed",
        "session.delivery_failed",
        "session.lost",  # its spawner went silent (`liveness`)
        "session.found",  # …and came back naming it
    }
)
GLOBAL_ONLY = frozenset({"models.checked"})  # applies to every repository
STANDING_PREFIX = "standing:"  # a spawner's own standing session, not an App work item
# Field names the event log itself uses; a reported field of that name is kept renamed.
_RESERVED = frozenset({"session"})


@dataclass
class Ingested:
    accepted: int = 0
    duplicates: int = 0
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
        }


def check_event(raw: Any) -> str | None:
    """Why a reported event cannot be recorded, or None when it can (pure)."""
    if not isinstance(raw, dict):
        return "an event must be a JSON object"
    name = raw.get("event")
    if not isinstance(name, str) or not EVENT_NAME_RE.match(name) or len(name) > 64:
        return "`event` must be a dotted lower-case name such as session.spawned"
    item = raw.get("work_item_id")
    if item is not None and (not isinstance(item, str) or len(item) > 256):
        return "`work_item_id` must be a string of at most 256 characters, or null"
    if len(repr(raw)) > MAX_EVENT_BYTES:
        return f"an event must be smaller than {MAX_EVENT_BYTES} bytes"
    if not may_report(name):
        return f"`{name}` is not an event a spawner reports"
    if "ts" in raw:
        return "`ts` is the App's (when it received the event); send the spawner's as `reported_ts`"
    return None


def may_report(name: str) -> bool:
    """Whether a spawner may report an event called `name` (pure)."""
    return name in SPAWNER_EVENTS and name not in APP_NAMES


def event_fields(raw: dict[str, Any], spawner: Spawner) -> dict[str, Any]:
    """The fields recorded beside the name and work item (pure)."""
    fields = {k: v for k, v in raw.items() if k not in ("event", "work_item_id")}
    for key in _RESERVED & fields.keys():
        fields[f"reported_{key}"] = fields.pop(key)
    return {**fields, "spawner": spawner.name, "spawner_id": spawner.id}


def _first_time(session: Session, spawner: Spawner, event_id: Any) -> bool:
    if event_id is None:
        return True
    key = f"spawner-event:{spawner.id}:{str(event_id)[:128]}"
    if session.get(Once, key) is not None:
        return False
    try:
        with session.begin_nested():
            session.add(Once(key=key))
    except IntegrityError:
        return False
    return True


def verdict_rows(verdicts: Any) -> list[ModelVerdict]:
    """The well-formed verdicts of a `models.checked` event (pure): a row token of a declared
    kind (`model-<name>` / `effort-<name>`) and a known verdict; anything else is skipped."""
    rows: list[ModelVerdict] = []
    for entry in verdicts if isinstance(verdicts, list) else []:
        if not isinstance(entry, dict):
            continue
        token, verdict = entry.get("token"), entry.get("verdict")
        if not (isinstance(token, str) and VERDICT_TOKEN_RE.match(token)):
            continue
        if verdict not in VERDICTS:
            continue
        harness = entry.get("harness")
        detail = entry.get("detail")
        rows.append(
            ModelVerdict(
                token=token,
                verdict=verdict,
                harness=harness if isinstance(harness, str) and NAME_RE.match(harness) else "",
                detail=detail[:2000] if isinstance(detail, str) else "",
                probed_at=datetime.now(UTC),
            )
        )
    return rows


def record_verdicts(session: Session, verdicts: Any) -> None:
    """What a devbox's `the-loop models check` found becomes what the gate offers."""
    for row in verdict_rows(verdicts):
        session.merge(row)


def _scope_problem(
    session: Session, raw: dict[str, Any], scope: list[str], locked: dict[str, WorkItem | None]
) -> tuple[str | None, WorkItem | None]:
    """Why a well-formed event is outside the spawner's scope (or None), and its work item
    (locked once per batch: `locked` keeps the items this batch holds)."""
    if raw["event"] in GLOBAL_ONLY and ANY_REPOSITORY not in scope:
        return f"only a spawner serving every repository may report {raw['event']}", None
    name = raw.get("work_item_id")
    if not name or name.startswith(STANDING_PREFIX):
        return None, None
    # Locked until the batch's transaction ends: a job's result reported meanwhile rewrites
    # the same session record (see `results`).
    if name not in locked:
        locked[name] = lock_work_item(session, name)
    item = locked[name]
    if item is None:
        return f"no work item {name}", None
    if not serves(scope, item.repo_full_name):
        return f"this spawner does not serve {item.repo_full_name}", None
    return None, item


def ingest(services: Services, session: Session, spawner: Spawner, events: list[Any]) -> Ingested:
    """Record a batch of reported events inside the caller's transaction."""
    out = Ingested()
    scope = scope_of(spawner)
    locked: dict[str, WorkItem | None] = {}
    for index, raw in enumerate(events[:MAX_BATCH]):
        why = check_event(raw)
        item = None
        if why is None:
            why, item = _scope_problem(session, raw, scope, locked)
        if why is not None:
            out.rejected.append({"index": index, "error": why})
            continue
        if not _first_time(session, spawner, raw.get("id")):
            out.duplicates += 1
            continue
        name = raw["event"]
        fields = event_fields(raw, spawner)
        services.events.emit(name, raw.get("work_item_id"), session=session, **fields)
        out.accepted += 1
        if name == "models.checked":
            record_verdicts(session, raw.get("verdicts"))
        if item is None:
            continue
        if name not in NOT_RENEWING:  # an exited session's tokens lapse unless it respawns
            renew_session_tokens(session, [item.id], services.clock())
        if name == USAGE_EVENT:
            counts = reported_counts(raw)
            add_usage(session, item.id, counts)
            record_spend(services.config, session, item, counts, services.clock())
            usage_changed(item, services.clock())
        if name == ROUTES_EVENT and add_route_counts(item, raw.get("routes")):
            usage_changed(item, services.clock())
        apply_session_event(services, session, item, name, fields)
        if name == "session.egress_refused":
            announce_refusal(services, session, item, fields)
        if name.startswith("session."):
            check_spending(services, session, item, name)
        if name == "session.exited" and item.state == WorkItemStatus.EXITED:
            # The session is over: its token dies (a job claimed now starts a new one).
            revoke_session_tokens(session, item.id, claimed_jobs(session, item.id))
        if name.startswith("session.") and name not in NOT_MIRRORED:
            payload = {"event": name, **fields, "url": item.html_url}
            services.mirror.post(session, item.id, "session", payload)
    for index in range(MAX_BATCH, len(events)):
        out.rejected.append({"index": index, "error": f"at most {MAX_BATCH} events per batch"})
    return out
