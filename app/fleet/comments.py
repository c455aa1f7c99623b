"""What a session says: `the-loop comment` / `the-loop ask`, posted on the issue as the App.

The comment carries the App's agent marker, and is written by the App's bot account, so the
App never reads it back as human input (no follow-up, no execute). A question is set apart
so a human skimming the issue sees that the session waits for an answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy.orm import Session

from app.config import SessionComments
from app.fleet.fleet_errors import FleetError
from app.gate import MarkerKind, defuse, defuse_mentions, marker
from app.github import Services
from app.store import WorkItem
from app.workitems import POSTS_KEY, THROTTLED_KEY, admit, posted_times, refusal_text

MAX_BODY = 60_000  # GitHub refuses comments over 65 536 characters; leave room for framing


class AgentCommentKind(StrEnum):
    COMMENT = "comment"
    ASK = "ask"


class CommentRefused(FleetError, ValueError):
    """The request cannot be posted; `status` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class AgentComment:
    work_item_id: str
    kind: AgentCommentKind
    body: str


def parse_request(data: Any) -> AgentComment:
    """Validate a `/spawner/v1/comments` body (pure); raises CommentRefused(400)."""
    if not isinstance(data, dict):
        raise CommentRefused(400, "the body must be a JSON object")
    work_item_id, kind, body = data.get("work_item_id"), data.get("kind"), data.get("body")
    if not isinstance(work_item_id, str) or not work_item_id:
        raise CommentRefused(400, "`work_item_id` is required")
    if kind not in set(AgentCommentKind):
        raise CommentRefused(400, "`kind` must be 'comment' or 'ask'")
    if not isinstance(body, str) or not body.strip():
        raise CommentRefused(400, "`body` must be non-empty text")
    if len(body) > MAX_BODY:
        raise CommentRefused(400, f"`body` is longer than {MAX_BODY} characters")
    return AgentComment(work_item_id=work_item_id, kind=AgentCommentKind(kind), body=body)


def render(comment: AgentComment, allow_mentions: bool = False) -> str:
    """The issue comment's markdown: the agent's words, framed, with the hidden marker (pure).
    Its @-mentions notify nobody unless the operator allows them."""
    # A marker the agent wrote itself is shown, not hidden: it must never pass for the App's
    # own checklist, confirmation or a Slack attribution.
    text = defuse(comment.body.strip())
    if not allow_mentions:
        text = defuse_mentions(text)
    if comment.kind == AgentCommentKind.ASK:
        text = f"**The agent asks** (reply on this issue to answer):\n\n{text}"
    return f"{text}\n\n{marker(MarkerKind.AGENT, type=comment.kind.value)}"


def reserve_post(
    services: Services, session: Session, item: WorkItem, rule: SessionComments, now: float
) -> str | None:
    """Count one more post of `item` against `rule` (the caller holds the item locked): None
    when it may be made, else what the session is told. The first refusal is remembered for
    the progress comment and reported as an event; later ones cost nothing but the answer."""
    facts = dict(item.session or {})
    admission = admit(rule, posted_times(facts), now)
    if admission.admitted:
        item.session = {**facts, POSTS_KEY: list(admission.kept)}
        return None
    if not facts.get(THROTTLED_KEY):
        item.session = {**facts, THROTTLED_KEY: True}
        services.events.emit(
            "agent.comment_throttled",
            item.id,
            session=session,
            level="warning",
            burst=rule.burst,
            per_hour=rule.per_hour,
        )
    return refusal_text(rule, admission.retry_after)


def post(
    services: Services,
    session: Session,
    item: WorkItem,
    comment: AgentComment,
    allow_mentions: bool = False,
) -> dict[str, Any]:
    """Post on the item's issue as the App; record and mirror it in the caller's transaction."""
    if item.installation_id is None:
        raise CommentRefused(409, f"{item.id} has no installation to post with")
    owner, name = item.repo_full_name.split("/", 1)
    client = services.github.installation(item.installation_id)
    resp = client.rest.issues.create_comment(
        owner, name, item.issue_number, data={"body": render(comment, allow_mentions)}
    )
    posted = resp.parsed_data
    services.events.emit(
        "agent.comment",
        item.id,
        session=session,
        kind=comment.kind.value,
        comment_id=posted.id,
        html_url=posted.html_url,
    )
    services.mirror.post(
        session,
        item.id,
        "agent_comment",
        {"kind": comment.kind.value, "body": comment.body, "url": item.html_url},
    )
    return {"comment_id": posted.id, "html_url": posted.html_url}
