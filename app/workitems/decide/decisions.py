"""What every human decision on a work item shares, whatever the surface: the one
`Decision` value (who, from which surface, on which item, what they said), the one
`Outcome` an execute, a review, an answer or a follow-up returns, the locked row, and the
one refusal reply (execute, approve, changes and answer alike).

A surface — a GitHub comment handler, a Slack button or thread reply, the label that
executes — builds a `Decision` and hands it to a `Decide` (`execute_reply`, `gate_reply`,
`answer_reply`, `deliver_comment`) inside its own transaction, the way gidgethub hands a
router its `Event`; the surface reads the `Outcome` to tell its human what happened.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.gate import MarkerKind, refusal_markdown, who_may_execute
from app.github import IssueIO, Services
from app.store import WorkItem
from app.workitems.flow.authz import refusal


def lock_work_item(session: Session, work_item_id: str) -> WorkItem | None:
    """The work item, locked until this transaction ends, so two decisions (a comment and a
    Slack press) can never both apply. PostgreSQL locks the row; SQLite has no row locks,
    so a no-op UPDATE takes the database write lock before anything is read."""
    if session.get_bind().dialect.name == "sqlite":
        session.execute(
            update(WorkItem)
            .where(WorkItem.id == work_item_id)
            .values(updated_at=WorkItem.updated_at)
            .execution_options(synchronize_session=False)
        )
    return session.get(WorkItem, work_item_id, with_for_update=True, populate_existing=True)


@dataclass(frozen=True)
class Decision:
    """A human's decision on a work item as it arrived: who (`author`, a GitHub login), the
    surface (`source`: "github", "slack", "label"), the item, and what (`body`, their
    words). `ref` is the idempotency key (a GitHub comment id, a Slack action or message
    id); `comment_id` is the issue comment that carries the words, when there is one."""

    work_item_id: str
    author: str
    body: str
    ref: str
    source: str
    comment_id: int | None = None

    @classmethod
    def from_comment(cls, work_item_id: str, comment: Mapping[str, Any]) -> Decision:
        """A GitHub issue comment as a decision: its author's login, its words, its id."""
        ident = int(comment["id"])
        author = str((comment.get("user") or {}).get("login") or "")
        body = str(comment.get("body") or "")
        return cls(work_item_id, author, body, str(ident), "github", ident)


class Status(StrEnum):
    """What a decision did."""

    FROZEN = "frozen"  # execute: the selection is frozen and a spawn job queued
    QUEUED = "queued"  # answer, follow-up: a job waits for the item's spawner
    RECORDED = "recorded"  # review: the verdict is on the item and the session told
    REFUSED = "refused"  # nothing changed; `why` says why (answered once on GitHub)
    REPEAT = "repeat"  # this `ref` was already acted on
    ALREADY_FROZEN = "already-frozen"  # execute: the item was executed before
    CHANGED = "changed"  # execute: the issue was edited since it was read
    NOT_LIVE = "not-live"  # follow-up: the item has no session to deliver to
    NOT_A_WORK_ITEM = "not-a-work-item"


@dataclass(frozen=True)
class Outcome:
    """What an execute, a review, an answer or a follow-up did. `why` is set when it was
    refused (or, for an execute, when the issue changed); `job_id` is the job it queued for
    the spawner; `frozen` is an execute's frozen selection (its confirmation is posted after
    the commit); `choice` and `option` are the answer given."""

    status: Status
    why: str = ""
    job_id: int | None = None
    frozen: dict[str, Any] | None = None
    choice: int = 0
    option: str = ""


Decide = Callable[[Services, Session, Decision], Outcome]
"""How every surface hands a decision on: in the caller's transaction, one `Outcome` back."""


def emit(services: Services, session: Session, event: str, item: str, **fields: Any) -> None:
    services.events.emit(event, item, session=session, **fields)


def refuse(
    services: Services,
    session: Session,
    item: WorkItem,
    decision: Decision,
    why: str,
    reason: str,
    *,
    keyword: str,
    action: str = "start the work",
) -> None:
    """Record the refusal; on GitHub, answer the comment once with who may decide."""
    config = services.config
    emit(
        services,
        session,
        "gate.refused",
        item.id,
        who=decision.author,
        why=why,
        reason=reason,
        source=decision.source,
        ref=decision.ref,
        action=action,
    )
    if decision.source == "github" and item.installation_id is not None:
        may = who_may_execute(config.routing.authorized_users, item.repo_full_name, keyword)
        text = refusal_markdown(decision.author, why, may, item.id, decision.ref, action)
        io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
        io.post_once(text, MarkerKind.REFUSAL, item=item.id, ref=decision.ref)
        services.mirror.post(
            session, item.id, "refused", {"who": decision.author, "why": why, "url": item.html_url}
        )


@dataclass(frozen=True)
class Asking:
    """A keyword reply's item, locked, whose author may act on it; `refused` answers the
    rest of the way with the one-line refusal and returns its outcome."""

    item: WorkItem
    refused: Callable[[str, str], Outcome]


def ask_on_item(
    services: Services, session: Session, decision: Decision, *, keyword: str, action: str
) -> Asking | Outcome:
    """What every keyword reply on a running item does first: lock its item (not a work item
    unless its selection is frozen) and refuse an author the execute rule does not
    authorize. The outcome that ends it, else the item and how to refuse."""
    item = lock_work_item(session, decision.work_item_id)
    if item is None or item.frozen is None:
        return Outcome(Status.NOT_A_WORK_ITEM)

    def refused(why: str, reason: str) -> Outcome:
        refuse(services, session, item, decision, why, reason, keyword=keyword, action=action)
        return Outcome(Status.REFUSED, why=why)

    why = refusal(services, item.installation_id, item.repo_full_name, decision.author)
    if why is not None:
        return refused(why, "unauthorized")
    return Asking(item, refused)
