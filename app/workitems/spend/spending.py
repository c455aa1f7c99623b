"""A work item's budget kept by the App, its one owner: the App has the usage the gateways
report and the operator's limits, so it alone decides when a run is near or past its budget.

After every report about an item (`fleet/reports.py`) `check_spending` weighs what the run
spent (`budgets.py`). At 90 % it sends the session one notice, pasted like a follow-up,
that starts `the-loop: budget` and asks it to commit, push and stop. At 100 % it sends a
stop job with reason `budget`: the spawner's gateway refuses the item's model requests from
then on, the spawner stops the session, and the ending comment says what was spent and how
to go on. `the-loop budget +<amount>` by an authorized person adds to a limit, records who,
and relaunches an item its budget stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.gate import MarkerKind, marker
from app.github import IssueIO, Services
from app.store import WorkItem, WorkItemStatus, announce
from app.workitems.decide.decisions import (
    Decision,
    Outcome,
    Status,
    ask_on_item,
    emit,
    lock_work_item,
    refuse,
)
from app.workitems.flow.authz import refusal
from app.workitems.flow.capacity import hold_line
from app.workitems.flow.jobs import deliver_job, enqueue, stop_job
from app.workitems.flow.states import Happened, is_live, transition
from app.workitems.spend.budget_texts import (
    cap_line,
    cap_refusal_note,
    cap_warning_text,
    lift_ack_text,
    raise_ack_text,
    refusal_note,
    warning_text,
)
from app.workitems.spend.budgets import (
    BudgetLevel,
    Limits,
    Raise,
    Spent,
    asks_lift,
    budget_text,
    level_of,
    limits_of,
    parse_raise,
    since_base,
    tokens_in,
)
from app.workitems.spend.spend_caps import any_cap, cap_level, lift, mark_held
from app.workitems.spend.spend_windows import window_key
from app.workitems.spend.usage import priced, usage_of, wall_minutes
from app.workitems.tell.endings import BUDGET_REASON

NOTICE_SOURCE = "notice"  # a deliver job whose body the session reads verbatim
MAX_RAISES_KEPT = 50


def _facts(item: WorkItem) -> dict[str, Any]:
    facts = dict(item.budget) if isinstance(item.budget, dict) else {}
    facts.setdefault("run", 1)
    facts.setdefault("extra", {})
    return facts


def _model(item: WorkItem) -> str:
    frozen = item.frozen if isinstance(item.frozen, dict) else {}
    return str(frozen.get("model") or "")


def standing(
    services: Services, session: Session, item: WorkItem, facts: dict[str, Any]
) -> tuple[Limits, Spent]:
    """The run's limits and what it spent so far."""
    limits = limits_of(services.config.routing.budget, facts.get("extra") or {})
    counts = since_base(usage_of(session, [item.id])[item.id], facts.get("base") or {})
    ran = wall_minutes(item.session or {}, services.clock()) or 0.0
    before = facts.get("base_minutes")
    minutes = ran - (before if isinstance(before, int | float) else 0.0)
    cost = priced(services.config, _model(item), counts)
    return limits, Spent(tokens=tokens_in(counts), usd=cost, minutes=max(0.0, minutes))


def budget_line_of(services: Services, session: Session, item: WorkItem) -> str:
    """`**Budget:** tokens 9.2k of 10k · …`, or "" when no budget is configured; for an
    item a spend cap stopped, that cap while it holds."""
    if _capped(item):
        now = services.clock()
        _, cap = cap_level(services.config, session, item.installation_id, item.repo_full_name, now)
        if cap is not None:
            return cap_line(cap, now)
    limits, spent = standing(services, session, item, _facts(item))
    return f"**Budget:** {budget_text(limits, spent)}" if not limits.empty else ""


def budget_json(services: Services, session: Session, item: WorkItem) -> dict[str, Any] | None:
    """The item's budget for `/status`: its limits, what its run spent, how far it is, and
    who raised it; None when no budget is configured."""
    facts = _facts(item)
    limits, spent = standing(services, session, item, facts)
    if limits.empty:
        return None
    level, kind = level_of(limits, spent)
    raises = [r for r in facts.get("raises") or [] if isinstance(r, dict)]
    return {
        "limits": {"tokens": limits.tokens, "usd": limits.usd, "minutes": limits.minutes},
        "spent": {"tokens": spent.tokens, "usd": spent.usd, "minutes": round(spent.minutes, 1)},
        "state": "spent" if facts.get("spent") else level.name.lower(),
        "limit": str(facts.get("spent") or kind),
        "raised_by": [
            {"by": r.get("by"), "kind": r.get("kind"), "amount": r.get("amount")} for r in raises
        ],
    }


def _notice(services: Services, session: Session, item: WorkItem, key: str, text: str) -> None:
    payload = deliver_job(
        item, author="the-loop", body=text, ref=key, source=NOTICE_SOURCE, comment_id=None
    )
    enqueue(services, session, f"deliver:{NOTICE_SOURCE}:{key}", payload)


def check_spending(services: Services, session: Session, item: WorkItem, event: str) -> None:
    """Weigh the item's run, then its repository's spend caps, after a reported `event`
    (inside the caller's transaction)."""
    configured = services.config.routing.budget
    own = not (configured.tokens is None and configured.usd is None and configured.minutes is None)
    if not own and not any_cap(services.config):
        return
    facts = _facts(item)
    if is_live(item.state) and item.frozen is not None and not facts.get("spent"):
        if own:
            _weigh_own(services, session, item, facts)
        if not facts.get("spent") and item.state in (
            WorkItemStatus.RUNNING,
            WorkItemStatus.STALLED,
        ):
            _weigh_caps(services, session, item, facts)
    if facts != item.budget:
        item.budget = facts


def _weigh_own(services: Services, session: Session, item: WorkItem, facts: dict[str, Any]) -> None:
    """The item's own budget: warned once at 90 %, stopped at 100 %."""
    limits, spent = standing(services, session, item, facts)
    level, kind = level_of(limits, spent)
    run = facts["run"]
    if level is BudgetLevel.SPENT:
        facts["spent"] = kind
        note = refusal_note(limits, spent)
        stop = stop_job(item, reason=BUDGET_REASON, note=note)
        enqueue(services, session, f"stop:budget:{item.id}:{run}", stop)
        emit(
            services, session, "budget.spent", item.id, limit=kind, spent=budget_text(limits, spent)
        )
        facts["stops"] = int(facts.get("stops") or 0) + 1
    elif level is BudgetLevel.WARN and not facts.get("warned"):
        facts["warned"] = True
        _notice(
            services, session, item, f"budget-warn:{item.id}:{run}", warning_text(limits, spent)
        )
        emit(
            services,
            session,
            "budget.warned",
            item.id,
            limit=kind,
            spent=budget_text(limits, spent),
        )


def _weigh_caps(
    services: Services, session: Session, item: WorkItem, facts: dict[str, Any]
) -> None:
    """The spend caps over the item's repository: a running session is told to wrap up
    once per window at 90 % of one, and stopped when one is reached; the items waiting in
    line then say what holds them."""
    now = services.clock()
    config = services.config
    level, cap = cap_level(config, session, item.installation_id, item.repo_full_name, now)
    if cap is None:
        return
    window = window_key(cap.window, now)
    if level is BudgetLevel.SPENT:
        facts["spent"] = cap.name
        facts["capped"] = window
        stop = stop_job(item, reason=BUDGET_REASON, note=cap_refusal_note(cap, now))
        enqueue(services, session, f"stop:cap:{item.id}:{facts['run']}:{window}", stop)
        emit(services, session, "budget.cap_reached", item.id, cap=cap.name, spent=cap.words())
        facts["stops"] = int(facts.get("stops") or 0) + 1
        mark_held(config, session, now)
    elif level is BudgetLevel.WARN and facts.get("cap_warned") != window:
        facts["cap_warned"] = window
        key = f"cap-warn:{item.id}:{window}"
        _notice(services, session, item, key, cap_warning_text(cap))
        emit(services, session, "budget.cap_warned", item.id, cap=cap.name, spent=cap.words())


def weigh_time(services: Services, session: Session, work_items: Sequence[str]) -> None:
    """Weigh running items against a minutes budget (their spawner polls once a minute at
    least), so a session that spends time without using the model is stopped too."""
    if services.config.routing.budget.minutes is None:
        return
    for work_item_id in work_items:
        item = session.get(WorkItem, work_item_id)
        if item is not None:
            check_spending(services, session, item, "spawner.poll")


def restart_run(session: Session, item: WorkItem, now: datetime) -> None:
    """A new execute starts a new run: its counts and minutes start from what the item used
    so far."""
    previous = _facts(item)
    item.budget = {
        "run": int(previous.get("run") or 0) + 1,
        "base": usage_of(session, [item.id])[item.id],
        "base_minutes": wall_minutes(item.session or {}, now) or 0.0,
        "stops": int(previous.get("stops") or 0),
        "extra": {},
        "raises": list(previous.get("raises") or [])[-MAX_RAISES_KEPT:],
    }


def stopped_by_budget(item: WorkItem) -> bool:
    """Whether the item's session was stopped because its budget ran out."""
    return item.state == WorkItemStatus.STOPPED and bool((item.budget or {}).get("spent"))


def raise_reply(services: Services, session: Session, decision: Decision) -> Outcome:
    """Apply `the-loop budget +<amount>` from any surface: RECORDED when the budget grew,
    else REPEAT, REFUSED (with why) or NOT_A_WORK_ITEM. `the-loop budget` alone lifts the
    spend caps instead (`lift_reply`)."""
    if asks_lift(decision.body, services.config.routing.trigger.budget_keyword):
        return lift_reply(services, session, decision)
    reply = decision
    keyword = services.config.routing.trigger.budget_keyword
    asking = ask_on_item(services, session, decision, keyword=keyword, action="raise the budget")
    if isinstance(asking, Outcome):
        return asking
    item, refused = asking.item, asking.refused
    asked = parse_raise(reply.body, keyword)
    if not isinstance(asked, Raise):
        return refused(asked, "bad-amount")
    if getattr(services.config.routing.budget, asked.kind) is None:
        return refused(f"no {asked.kind} budget is set (`routing.budget.{asked.kind}`)", "no-limit")
    facts = _facts(item)
    raises = list(facts.get("raises") or [])
    if any(r.get("ref") == reply.ref for r in raises if isinstance(r, dict)):
        return Outcome(Status.REPEAT)
    extra = dict(facts.get("extra") or {})
    extra[asked.kind] = float(extra.get(asked.kind) or 0) + asked.amount
    facts["extra"] = extra
    at = services.clock().isoformat()
    raises.append(
        {"by": reply.author, "kind": asked.kind, "amount": asked.amount, "ref": reply.ref, "at": at}
    )
    facts["raises"] = raises[-MAX_RAISES_KEPT:]
    limits, spent = standing(services, session, item, facts)
    level, _ = level_of(limits, spent)
    stopping = is_live(item.state) and bool(facts.get("spent"))  # its budget stop is on its way
    if stopping and level < BudgetLevel.SPENT:
        facts["resume"] = {"by": reply.author, "words": asked.words, "ref": reply.ref}
    item.budget = facts
    emit(
        services,
        session,
        "budget.raised",
        item.id,
        by=reply.author,
        kind=asked.kind,
        amount=asked.amount,
        source=reply.source,
        ref=reply.ref,
        budget=budget_text(limits, spent),
    )
    if stopping:
        after = "relaunched once its stop lands" if level < BudgetLevel.SPENT else "spent"
    elif stopped_by_budget(item) and level < BudgetLevel.SPENT:
        after = "relaunched" if _go_on(services, session, item, reply.author, asked.words) else ""
    else:
        after = "spent" if level is BudgetLevel.SPENT else ""
        if level < BudgetLevel.SPENT:
            _reopen(item, level)
    _acknowledge(services, item, reply, asked, limits, spent, after)
    return Outcome(Status.RECORDED)


def _reopen(item: WorkItem, level: BudgetLevel) -> None:
    """The run goes on under its new limits: a later warning or stop is a new one (a run
    still past 90 % of them is not warned again)."""
    facts = _facts(item)
    facts["spent"] = ""
    facts["run"] = int(facts["run"]) + 1
    facts["warned"] = level >= BudgetLevel.WARN
    facts.pop("resume", None)
    facts.pop("capped", None)
    item.budget = facts


def _go_on(
    services: Services, session: Session, item: WorkItem, by: str, words: str, lifted: bool = False
) -> bool:
    """Relaunch an item its budget (or a spend cap, `lifted` since) stopped, now that it has
    more; False if it cannot."""
    limits, spent = standing(services, session, item, _facts(item))
    level, _ = level_of(limits, spent)
    if level is BudgetLevel.SPENT or transition(item, Happened.BUDGET_RAISED) is None:
        return False
    _reopen(item, level)
    text = (
        f"the-loop: budget — @{by} lifted the spend caps for today. Continue where you left off."
        if lifted
        else f"the-loop: budget raised by @{by} (+{words}; now {budget_text(limits, spent)}). "
        "Continue where you left off."
    )
    run = _facts(item)["run"]
    _notice(services, session, item, f"budget-raised:{item.id}:{run}", text)
    return True


def resume_after_stop(services: Services, session: Session, item: WorkItem) -> None:
    """A budget stop landed after someone raised the budget (or lifted the spend caps)
    meanwhile: relaunch the item."""
    facts = _facts(item)
    resume = facts.get("resume")
    if not isinstance(resume, dict) or not stopped_by_budget(item):
        return
    by, words = str(resume.get("by") or ""), str(resume.get("words") or "")
    _go_on(services, session, item, by, words, lifted=bool(resume.get("lifted")))


def lift_reply(services: Services, session: Session, decision: Decision) -> Outcome:
    """Apply `the-loop budget` alone from any surface: the spend caps over the item's
    repository are lifted for the rest of the UTC day, the items they held go on (a session
    they stopped is relaunched). RECORDED, else REPEAT, REFUSED (with why) or
    NOT_A_WORK_ITEM."""
    hold_line(session)  # the item may wait in line: the line before its row (`hold_line`)
    item = lock_work_item(session, decision.work_item_id)
    if item is None or item.frozen is None:
        return Outcome(Status.NOT_A_WORK_ITEM)
    config, now = services.config, services.clock()
    capped = _capped(item)
    why, reason = refusal(services, item.installation_id, item.repo_full_name, decision.author), ""
    if why is not None:
        reason = "unauthorized"
    elif not capped:
        level, _ = cap_level(config, session, item.installation_id, item.repo_full_name, now)
        if level is not BudgetLevel.SPENT:
            why = "no daily or monthly budget holds this item; `+<amount>` adds to its own"
            reason = "no-cap"
    if why is not None:
        keyword = config.routing.trigger.budget_keyword
        refuse(
            services, session, item, decision, why, reason, keyword=keyword, action="lift the caps"
        )
        return Outcome(Status.REFUSED, why)
    lifted = lift(session, item.installation_id, item.repo_full_name, decision.author, now)
    if not lifted and not capped:
        return Outcome(Status.REPEAT)
    emit(services, session, "budget.lifted", item.id, by=decision.author, source=decision.source)
    mark_held(config, session, now)
    announce(session, item.repo_full_name)  # its held spawn may be claimed now
    after = ""
    facts = _facts(item)
    if capped and is_live(item.state):  # its cap's stop is on its way
        facts["resume"] = {"by": decision.author, "words": "", "ref": decision.ref, "lifted": True}
        item.budget = facts
        after = "relaunched once its stop lands"
    elif capped and _go_on(services, session, item, decision.author, "", lifted=True):
        after = "relaunched"
    if decision.source == "github" and item.installation_id is not None:
        text = lift_ack_text(decision.author, after)
        _post_notice(services, item, decision.ref, text)
    return Outcome(Status.RECORDED)


def _capped(item: WorkItem) -> bool:
    """Whether a spend cap stopped (or is stopping) the item's session."""
    facts = _facts(item)
    return bool(facts.get("spent")) and bool(facts.get("capped"))


def _post_notice(services: Services, item: WorkItem, ref: str, text: str) -> None:
    lines = [text, "", marker(MarkerKind.NOTICE, item=item.id, ref=ref)]
    io = IssueIO(services.github, item.installation_id or 0, item.repo_full_name, item.issue_number)
    io.post_once("\n".join(lines) + "\n", MarkerKind.NOTICE, item=item.id, ref=ref)


def _acknowledge(
    services: Services,
    item: WorkItem,
    reply: Decision,
    asked: Raise,
    limits: Limits,
    spent: Spent,
    after: str,
) -> None:
    if reply.source != "github" or item.installation_id is None:
        return
    text = raise_ack_text(reply.author, asked.words, budget_text(limits, spent), after)
    _post_notice(services, item, reply.ref, text)
