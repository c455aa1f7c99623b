"""A human's answer to the question a stalled session's screen asks: `the-loop answer <n>` on
the issue, or a button in Slack.

The same authorization rule as execute, the same one-line refusal. The App knows the question
from the session's last `session.stalled` report (its options and fingerprint); an answer to
an item that is not waiting at a question, or an option it does not offer, changes nothing.
An accepted answer becomes one answer job for the spawner that hosts the session, keyed by
the reply's `ref` (a redelivered comment or a second press queues nothing more). The spawner
presses keys only while the screen still shows that very question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy.orm import Session

from app.gate.parse import is_execute
from app.services import Services
from app.workitems.authz import refusal
from app.workitems.decisions import Reply, emit, lock_work_item, refuse
from app.workitems.jobs import answer_job, enqueue
from app.workitems.states import is_live

_NUMBER = re.compile(r"\s*(\d{1,3})\b")
# "(question 1a2b3c4d)" after the number pins the answer to the question it was given for
# (a Slack button adds it): an answer to a question no longer on screen is refused.
_PINNED = re.compile(r"\(question ([0-9a-f]{8,16})\)")


class AnswerStatus(StrEnum):
    QUEUED = "queued"
    REFUSED = "refused"
    REPEAT = "repeat"
    NOT_A_WORK_ITEM = "not-a-work-item"


@dataclass(frozen=True)
class AnswerOutcome:
    status: AnswerStatus
    why: str = ""
    choice: int = 0
    option: str = ""


def chosen_number(body: str, keyword: str) -> int | None:
    """The option number after the keyword (pure); None when the reply names none."""
    if not is_execute(body, keyword):
        return None
    match = _NUMBER.match(body.lstrip("\ufeff \t\r\n")[len(keyword.strip()) :])
    return int(match.group(1)) if match else None


def pinned_question(body: str) -> str:
    """The question fingerprint an answer names, or "" (pure)."""
    match = _PINNED.search(body)
    return match.group(1) if match else ""


def answer_text(keyword: str, choice: int, fingerprint: str) -> str:
    """The words of an answer given by a button: the number and the question it was for."""
    return f"{keyword} {choice} (question {fingerprint[:8]})"


def answer_reply(
    services: Services, session: Session, work_item_id: str, reply: Reply
) -> AnswerOutcome:
    """Queue the answer `reply` gives to `work_item_id`'s question, or refuse it."""
    item = lock_work_item(session, work_item_id)
    if item is None or item.frozen is None:
        return AnswerOutcome(AnswerStatus.NOT_A_WORK_ITEM)
    keyword = services.config.routing.trigger.answer_keyword

    def refused(why: str, reason: str) -> AnswerOutcome:
        refuse(services, session, item, reply, why, reason, keyword=keyword, action="answer")
        return AnswerOutcome(AnswerStatus.REFUSED, why=why)

    why = refusal(services, item.installation_id, item.repo_full_name, reply.author)
    if why is not None:
        return refused(why, "unauthorized")
    facts = item.session or {}
    options = [str(o) for o in facts.get("stall_options") or []]
    fingerprint = str(facts.get("stall_fingerprint") or "")
    if not is_live(item.state) or not facts.get("stall") or not options or not fingerprint:
        return refused(
            "the session is not waiting at a question it offers options for", "no-question"
        )
    pinned = pinned_question(reply.body)
    if pinned and not fingerprint.startswith(pinned):
        return refused("the screen shows another question now; answer the new one", "stale")
    number = chosen_number(reply.body, keyword)
    if number is None:
        return refused(
            f"say which option: `{keyword} <n>`, n from 1 to {len(options)}", "no-number"
        )
    if not 1 <= number <= len(options):
        return refused(
            f"there is no option {number}; the screen offers 1 to {len(options)}", "out-of-range"
        )
    option = options[number - 1]
    job = answer_job(
        item,
        choice=number,
        option=option,
        fingerprint=fingerprint,
        author=reply.author,
        source=reply.source,
        ref=reply.ref,
    )
    if enqueue(services, session, f"answer:{item.id}:{reply.ref}", job) is None:
        return AnswerOutcome(AnswerStatus.REPEAT, choice=number, option=option)
    emit(
        services,
        session,
        "gate.answered",
        item.id,
        by=reply.author,
        source=reply.source,
        ref=reply.ref,
        choice=number,
        option=option,
    )
    return AnswerOutcome(AnswerStatus.QUEUED, choice=number, option=option)


def answer_from_surface(
    services: Services,
    session: Session,
    work_item_id: str,
    author: str,
    body: str,
    *,
    ref: str,
    source: str,
    comment_id: int | None = None,
) -> AnswerOutcome:
    """`answer_reply` in the shape every surface's decision takes (see channels.deps)."""
    return answer_reply(
        services, session, work_item_id, Reply(author, body, ref, source, comment_id)
    )
