"""What every human decision on a work item shares, whatever the surface: the locked row,
who said it, and the one refusal reply (execute, approve and changes alike)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.gate.confirm import refusal_markdown, who_may_execute
from app.gate.markers import MarkerKind
from app.github.issues import IssueIO
from app.services import Services
from app.store.tables import WorkItem


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
class Reply:
    """A human's decision as it arrived: who, their words, and where from (`ref` is the
    idempotency key: a GitHub comment id or a Slack action/message id)."""

    author: str
    body: str
    ref: str
    source: str
    comment_id: int | None = None


def emit(services: Services, session: Session, event: str, item: str, **fields: Any) -> None:
    services.events.emit(event, item, session=session, **fields)


def refuse(
    services: Services,
    session: Session,
    item: WorkItem,
    reply: Reply,
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
        who=reply.author,
        why=why,
        reason=reason,
        source=reply.source,
        ref=reply.ref,
        action=action,
    )
    if reply.source == "github" and item.installation_id is not None:
        may = who_may_execute(config.routing.authorized_users, item.repo_full_name, keyword)
        text = refusal_markdown(reply.author, why, may, item.id, reply.ref, action)
        io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
        io.post_once(text, MarkerKind.REFUSAL, item=item.id, ref=reply.ref)
        services.mirror.post(
            session, item.id, "refused", {"who": reply.author, "why": why, "url": item.html_url}
        )
