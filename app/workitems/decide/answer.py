"""A human's answer to the question a stalled session's screen asks: `the-loop answer <n>` on
the issue, or a button in Slack.

The same authorization rule as execute, the same one-line refusal. The App knows the question
from the session's last `session.stalled` report (its options and fingerprint); an answer to
an item that is not waiting at a question, or an option it does not offer, changes nothing.
An accepted answer becomes one answer job for the spawner that hosts the session, keyed by
the decision's `ref` (a redelivered comment or a second press queues nothing more). The spawner
presses keys only while the screen still shows that very question.
"""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from app.gate import says_command
from app.github import Services
from app.workitems.decide.decisions import (
    Decision,
    Outcome,
    Status,
    ask_on_item,
    emit,
)
from app.workitems.flow.jobs import answer_job, enqueue
from app.workitems.flow.states import is_live

_NUMBER = re.compile(r"\s*(\d{1,3})\b")
# "(question 1a2b3c4d)" after the number pins the answer to the question it was given for
# (a Slack button adds it): an answer to a question no longer on screen is refused.
_PINNED = re.compile(r"\(question ([0-9a-f]{8,16})\)")


def chosen_number(body: str, keyword: str) -> int | None:
    """The option number after the keyword (pure); None when the reply names none."""
    if not says_command(body, keyword):
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


def answer_reply(services: Services, session: Session, decision: Decision) -> Outcome:
    """Queue the answer `decision` gives to its item's question, or refuse it (a `Decide`)."""
    keyword = services.config.routing.trigger.answer_keyword
    asking = ask_on_item(services, session, decision, keyword=keyword, action="answer")
    if isinstance(asking, Outcome):
        return asking
    item, refused = asking.item, asking.refused
    facts = item.session or {}
    options = [str(o) for o in facts.get("stall_options") or []]
    fingerprint = str(facts.get("stall_fingerprint") or "")
    if not is_live(item.state) or not facts.get("stall") or not options or not fingerprint:
        return refused(
            "the session is not waiting at a question it offers options for", "no-question"
        )
    pinned = pinned_question(decision.body)
    if pinned and not fingerprint.startswith(pinned):
        return refused("the screen shows another question now; answer the new one", "stale")
    number = chosen_number(decision.body, keyword)
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
        author=decision.author,
        source=decision.source,
        ref=decision.ref,
    )
    queued = enqueue(services, session, f"answer:{item.id}:{decision.ref}", job)
    if queued is None:
        return Outcome(Status.REPEAT, choice=number, option=option)
    emit(
        services,
        session,
        "gate.answered",
        item.id,
        by=decision.author,
        source=decision.source,
        ref=decision.ref,
        choice=number,
        option=option,
    )
    return Outcome(Status.QUEUED, job_id=queued.id, choice=number, option=option)
