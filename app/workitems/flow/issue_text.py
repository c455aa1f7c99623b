"""A work item's issue text: pinned with the checklist, noted on each edit, checked at execute.

`record_pin` runs when the checklist is posted; `note_edit` handles `issues.edited` (GitHub
says who edited, and when); `read_approved` re-reads the issue at execute and compares it
with the pin; `ask_again` answers an execute that found it changed, and pins what it read
so the next execute approves exactly that (`app.gate.textpin` holds the rules and the words).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from app.gate import (
    Change,
    MarkerKind,
    change_markdown,
    change_since,
    digest,
    issue_text,
    pin,
    work_item_id_of,
)
from app.github import HandlerContext, IssueIO, Services
from app.store import WorkItem


def record_pin(item: WorkItem, issue: Mapping[str, Any] | None, services: Services) -> None:
    """Pin the issue text the checklist is posted for (from the delivery's issue object)."""
    title, body = issue_text(issue) or (item.title, "")
    item.pinned = pin(title, body, services.clock())


def note_edit(ctx: HandlerContext) -> None:
    """`issues.edited` of a work item still waiting for its execute: remember who edited the
    title or body, and when, for the reply to the next execute."""
    repo = (ctx.payload.get("repository") or {}).get("full_name")
    issue = ctx.payload.get("issue") or {}
    changes = ctx.payload.get("changes") or {}
    number = issue.get("number")
    if (
        not isinstance(repo, str)
        or not isinstance(number, int)
        or not {"title", "body"} & set(changes)
    ):
        return
    item = ctx.session.get(WorkItem, work_item_id_of(repo, number))
    if item is None or item.pinned is None or item.frozen is not None:
        return
    by = (ctx.payload.get("sender") or {}).get("login")
    at = issue.get("updated_at") if isinstance(issue.get("updated_at"), str) else None
    edit = {"by": by if isinstance(by, str) else None, "at": at or ctx.now().isoformat()}
    item.pinned = {**item.pinned, "last_edit": edit}
    ctx.emit("workitem.issue_edited", item.id, by=edit["by"], fields=sorted(changes))


@dataclass(frozen=True)
class Reading:
    """The issue text an execute found, and how it differs from the pin (None: it does not)."""

    title: str
    body: str
    change: Change | None


def approved_record(item: WorkItem, reading: Reading) -> dict[str, Any]:
    """What the frozen record keeps of the approved text: its hash and when it was read."""
    return {"sha256": digest(reading.body), "read_at": (item.pinned or {}).get("read_at")}


def read_approved(
    item: WorkItem, io: IssueIO | None, delivered: Mapping[str, Any] | None
) -> Reading:
    """The issue as GitHub has it now (else as the delivery carried it, else as pinned),
    compared with the pin."""
    current = io.issue() if io is not None else None
    text = issue_text(current) or issue_text(delivered)
    if text is None:
        pinned = item.pinned or {}
        text = (str(pinned.get("title", item.title)), str(pinned.get("body", "")))
    updated = (current or delivered or {}).get("updated_at")
    change = change_since(item.pinned, *text, updated if isinstance(updated, str) else None)
    return Reading(*text, change=change)


def ask_again(
    services: Services,
    session: Session,
    item: WorkItem,
    io: IssueIO | None,
    reading: Reading,
    who: str,
    ref: str,
) -> str:
    """Answer an execute that found the issue changed: say what changed and ask for the
    execute again; pin what was read. Returns the reason, for the caller's outcome."""
    assert reading.change is not None
    change, read_at = reading.change, (item.pinned or {}).get("read_at")
    why = f"{change.summary()} changed since it was read; reply the execute keyword again"
    keyword = services.config.routing.trigger.execute_keyword
    if io is not None:
        text = change_markdown(who, change, read_at, keyword, item.id, ref)
        io.post_once(text, MarkerKind.CHANGED, item=item.id, ref=ref)
    services.events.emit(
        "gate.issue_changed",
        item.id,
        session=session,
        who=who,
        ref=ref,
        title_changed=change.title_changed,
        added=change.added,
        removed=change.removed,
        edited_by=change.by,
        edited_at=change.at,
    )
    services.mirror.post(
        session, item.id, "refused", {"who": who, "why": why, "url": item.html_url}
    )
    item.pinned = pin(reading.title, reading.body, services.clock())
    return why
