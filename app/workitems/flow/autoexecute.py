"""`routing.autoExecuteLabels`: labels that execute a work item without a reply.

When an `issues.labeled` delivery leaves every listed label on an issue whose work item is
parked at the gate, the item is executed with the checklist as posted (the default
selection), exactly as if the person who added the label had replied with the execute
keyword: the same authorization rule, the same freeze, the same confirmation. An
unauthorized labeller changes nothing but a `gate.refused` event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.gate import work_item_id_of
from app.github import HandlerContext
from app.store import WorkItem, WorkItemStatus
from app.workitems.decide.decisions import Decision
from app.workitems.decide.execute import execute_reply

SOURCE = "label"


def labels_on(issue: Any) -> set[str]:
    """The label names on an issue object, case-folded (GitHub compares them that way)."""
    labels = issue.get("labels") if isinstance(issue, dict) else None
    names = (label.get("name") for label in labels or [] if isinstance(label, dict))
    return {name.casefold() for name in names if isinstance(name, str)}


def all_present(wanted: Iterable[str], present: set[str]) -> bool:
    """True when `wanted` is non-empty and every one of its labels is in `present`."""
    needed = {label.casefold() for label in wanted}
    return bool(needed) and needed <= present


def execute_on_labels(ctx: HandlerContext) -> None:
    """`issues.labeled`: execute a parked item once every auto-execute label is on it.

    Runs after `start_work_item` in the same transaction, so the trigger label arriving last
    (with the others already on the issue) executes the item it has just parked.
    """
    routing = ctx.config.routing
    issue, repo = ctx.payload.get("issue"), ctx.payload.get("repository") or {}
    if not all_present(routing.auto_execute_labels, labels_on(issue)):
        return
    if not isinstance(issue, dict) or not isinstance(repo.get("full_name"), str):
        return
    work_item_id = work_item_id_of(repo["full_name"], issue["number"])
    item = ctx.session.get(WorkItem, work_item_id)
    if item is None or item.state != WorkItemStatus.PARKED or item.frozen is not None:
        return
    if item.checklist_comment_id is None:
        return  # not yet at the gate: the trigger label has not been handled
    labeller = str((ctx.payload.get("sender") or {}).get("login") or "")
    ctx.emit("gate.auto_execute", item.id, by=labeller, labels=list(routing.auto_execute_labels))
    said = routing.trigger.execute_keyword
    decision = Decision(item.id, labeller, said, f"label:{ctx.delivery_id}", SOURCE)
    execute_reply(ctx.services, ctx.session, decision, issue=issue)
