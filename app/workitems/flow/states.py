"""A work item's status and the one table of transitions between them (pure).

Every status change in the App goes through `transition`: a handler, the spawner API and
the Slack mirror say what happened, and the table says where that leads from where the
item is. What cannot follow from the current status changes nothing, so a late or repeated
report never revives an item that stopped, closed or finished. The README draws the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from app.store import WorkItem, WorkItemStatus

S = WorkItemStatus

# A session exists, is being started, or can be respawned to take a comment.
LIVE: frozenset[WorkItemStatus] = frozenset({S.FROZEN, S.SPAWNING, S.RUNNING, S.STALLED, S.EXITED})
EVERY: frozenset[WorkItemStatus] = frozenset(S)
# Where a frozen item waits for a person, who may run it again with an execute.
RUN_AGAIN: frozenset[WorkItemStatus] = frozenset({S.PR_CLOSED, S.LOST})
# A session a spawner reported it runs: what its spawner's death leaves unwatched.
HOSTED: frozenset[WorkItemStatus] = frozenset({S.RUNNING, S.STALLED})


class Happened(StrEnum):
    """What can happen to a work item, from any surface."""

    RELABELED = "labeled"  # the trigger label came back after an unlabel or a close
    UNLABELED = "unlabeled"  # the trigger label was removed before execute
    EXECUTED = "executed"  # an authorized execute froze the selection
    CLOSED = "closed"  # the issue was closed
    SPAWN_CLAIMED = "spawn.claimed"  # a spawner took the spawn job
    SPAWN_OK = "spawn.ok"  # the spawner reported the session it started
    SPAWN_FAILED = "spawn.failed"
    DELIVER_RESPAWNED = "deliver.respawned"  # a follow-up relaunched the session
    STOP_OK = "stop.ok"  # the spawner ended the session on purpose
    SESSION_SPAWNED = "session.spawned"
    SESSION_RESPAWNED = "session.respawned"
    SESSION_STALLED = "session.stalled"  # the pane waits on a keypress
    SESSION_UNSTALLED = "session.unstalled"  # someone answered it
    SESSION_EXITED = "session.exited"
    COMPLETED = "completed"  # the item walked to the graph's last node
    PR_MERGED = "pr.merged"  # its pull request merged: done, even after the issue closed
    PR_CLOSED = "pr.closed"  # its pull request closed unmerged: a human decides what next
    PR_REOPENED = "pr.reopened"  # …and was reopened: a follow-up relaunches the session
    BUDGET_RAISED = "budget.raised"  # an item stopped by its budget got more: it goes on
    SPAWNER_DEAD = "spawner.dead"  # the spawner hosting its session went silent
    SESSION_ALIVE = "session.alive"  # its spawner came back and reports the session live


@dataclass(frozen=True)
class Rule:
    """From any status in `sources`, the happening leads to `target`."""

    target: WorkItemStatus
    sources: frozenset[WorkItemStatus]


def _rule(target: WorkItemStatus, *sources: WorkItemStatus | frozenset[WorkItemStatus]) -> Rule:
    members: set[WorkItemStatus] = set()
    for source in sources:
        members |= source if isinstance(source, frozenset) else {source}
    return Rule(target, frozenset(members))


H = Happened
# The first rule whose sources hold the current status wins.
TABLE: Mapping[Happened, tuple[Rule, ...]] = {
    H.RELABELED: (_rule(S.PARKED, S.UNLABELED, S.CLOSED),),
    H.UNLABELED: (_rule(S.UNLABELED, S.PARKED),),
    # A closed-unmerged pull request's item may be executed again from the same checklist.
    # A lost session waits for a person too: an execute runs the item again.
    H.EXECUTED: (_rule(S.FROZEN, S.PARKED, RUN_AGAIN),),
    H.CLOSED: (
        _rule(S.STOPPED, LIVE, S.LOST),
        _rule(S.CLOSED, S.PARKED, S.UNLABELED, S.PR_CLOSED),
    ),
    H.SPAWN_CLAIMED: (_rule(S.SPAWNING, S.FROZEN),),
    # A new session that the watchdog already saw waiting on a prompt stays stalled.
    H.SPAWN_OK: (_rule(S.RUNNING, LIVE - {S.STALLED}),),
    H.SESSION_SPAWNED: (_rule(S.RUNNING, LIVE - {S.STALLED}),),
    H.SPAWN_FAILED: (_rule(S.EXITED, LIVE),),
    H.DELIVER_RESPAWNED: (_rule(S.RUNNING, LIVE),),
    H.SESSION_RESPAWNED: (_rule(S.RUNNING, LIVE),),
    H.SESSION_STALLED: (_rule(S.STALLED, LIVE),),
    H.SESSION_UNSTALLED: (_rule(S.RUNNING, LIVE),),
    H.SESSION_EXITED: (_rule(S.EXITED, LIVE, S.LOST),),
    # A stop always lands (the issue closed), except on an item that already closed, or
    # whose session was stopped because its pull request closed (it waits for a human).
    H.STOP_OK: (_rule(S.STOPPED, EVERY - {S.CLOSED, S.DONE, S.PR_CLOSED}),),
    H.COMPLETED: (_rule(S.DONE, LIVE, S.LOST),),
    # "Closes #n" closes the issue as the PR merges; either delivery may arrive first.
    H.PR_MERGED: (_rule(S.DONE, LIVE, S.STOPPED, S.PR_CLOSED, S.LOST),),
    H.PR_CLOSED: (_rule(S.PR_CLOSED, LIVE),),
    H.PR_REOPENED: (_rule(S.EXITED, S.PR_CLOSED),),
    H.BUDGET_RAISED: (_rule(S.EXITED, S.STOPPED),),
    # Lost is not live: a silent spawner's sessions count nowhere until it speaks again.
    H.SPAWNER_DEAD: (_rule(S.LOST, HOSTED),),
    H.SESSION_ALIVE: (_rule(S.RUNNING, S.LOST),),
}


def next_status(current: str, happened: Happened | str) -> WorkItemStatus | None:
    """The status after `happened`, or None when it changes nothing from `current`."""
    try:
        rules = TABLE[Happened(happened)]
    except ValueError:
        return None
    for rule in rules:
        if current in rule.sources:
            return rule.target if rule.target != current else None
    return None


def transition(item: WorkItem | None, happened: Happened | str) -> WorkItemStatus | None:
    """Apply `happened` to `item` (inside the caller's transaction); returns the new status,
    or None when nothing changed."""
    if item is None:
        return None
    target = next_status(item.state, happened)
    if target is not None:
        item.state = target
    return target


def is_live(status: str) -> bool:
    return status in LIVE
