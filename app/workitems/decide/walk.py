"""Walking a work item through the process graph (pure): which phases are in force, where the
pointer may move next, and why a move is refused.

The App's record is the authority on the pointer. A session asks for each move
(`the-loop phase next`) after producing the current phase's artifact; the App moves one
step at a time along the phases the human kept, never past a human gate without a recorded
decision, and never from a position it does not hold. The artifacts themselves live in the
devbox's checkout, so the session's report of them is taken as evidence for the progress
comment; the stop gate, which reads the checkout, still blocks on the first unmet node at or
before the pointer, so a session that jumps ahead gains nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.graph import NODE_NAMES, NODES, START_NODE, Node
from app.workitems.workitem_errors import WorkItemError

REVIEW_NODE = "review"
COMPLETE_NODE = NODE_NAMES[-1]
_BY_NAME: dict[str, Node] = {node.name: node for node in NODES}


def in_force(skips: Collection[str]) -> tuple[str, ...]:
    """The nodes this item walks, in order: every node the human did not skip (a skip of a
    node that cannot be skipped is ignored, as the stop gate ignores it)."""
    return tuple(n.name for n in NODES if not (n.name in skips and n.skippable))


def next_in_force(node: str, skips: Collection[str]) -> str | None:
    """The node after `node` among those in force; None at the end (or for an unknown node)."""
    walk = in_force(skips)
    if node not in walk:
        return None
    index = walk.index(node)
    return walk[index + 1] if index + 1 < len(walk) else None


def first_phase(skips: Collection[str]) -> str:
    """Where the pointer goes once the selection is signed: the first node after the start."""
    return next_in_force(START_NODE, skips) or COMPLETE_NODE


def is_human_gate(node: str) -> bool:
    found = _BY_NAME.get(node)
    return bool(found and found.human_gate)


def is_decision_gate(node: str) -> bool:
    """Whether `node` waits for `approve` or `changes`: review or an approval gate (the start
    gate waits for `execute` instead)."""
    return node != START_NODE and is_human_gate(node)


def is_approval_gate(node: str) -> bool:
    """Whether `node` is an opt-in stop for approval after a phase (not `review`)."""
    found = _BY_NAME.get(node)
    return bool(found and found.human_gate and found.opt_in)


def approved_phase(gate: str) -> str:
    """The phase whose work a decision gate judges ("" for any other node)."""
    found = _BY_NAME.get(gate)
    return found.approves if found else ""


def changes_go_to(gate: str, skips: Collection[str]) -> str:
    """Where a request for changes at `gate` puts the pointer: the phase it judges when that
    runs, else the gate itself (the session then works at the gate)."""
    back = approved_phase(gate)
    return back if back and back in in_force(skips) else gate


class MoveRefused(WorkItemError, ValueError):
    """A move the App will not make; the message is one line the agent can act on."""

    def __init__(self, message: str, *, stale: bool = False) -> None:
        super().__init__(message)
        self.stale = stale


@dataclass(frozen=True)
class Walk:
    """What the App holds about an item's position: the pointer, the human's skips and the
    human decisions recorded at gates (phase-selection's included)."""

    pointer: str
    skips: frozenset[str] = frozenset()
    decisions: Mapping[str, Any] = field(default_factory=dict)

    def decided(self, node: str) -> bool:
        return isinstance(self.decisions.get(node), dict)


def next_move(walk: Walk, asked_from: str) -> str:
    """The node the pointer moves to when a session at `asked_from` asks to go on.

    Refused when the session's view is stale (the App holds another position), when the
    current node is a human gate nobody has decided yet, or when there is nowhere to go.
    """
    if asked_from != walk.pointer:
        raise MoveRefused(
            f"the work item is at {walk.pointer}, not {asked_from}; run `the-loop phase` to see "
            "where it stands",
            stale=True,
        )
    if is_human_gate(walk.pointer) and not walk.decided(walk.pointer):
        raise MoveRefused(
            f"{walk.pointer} waits for a human decision on the issue; end your turn and wait "
            "for it (the answer arrives as a follow-up message)"
        )
    target = next_in_force(walk.pointer, walk.skips)
    if target is None:
        raise MoveRefused(f"{walk.pointer} is the last phase; there is nothing after it")
    return target


class PhaseState(StrEnum):
    """How the progress comment shows one phase."""

    DONE = "done"
    CURRENT = "current"
    WAITING = "waiting on a human"
    SKIPPED = "skipped"
    AHEAD = "ahead"


def phase_rows(walk: Walk) -> list[tuple[str, PhaseState]]:
    """Every node (the start gate and the end excluded) with how it stands (pure); an
    approval gate nobody ticked is no phase and is left out."""
    walked = in_force(walk.skips)
    here = walked.index(walk.pointer) if walk.pointer in walked else -1
    rows: list[tuple[str, PhaseState]] = []
    for node in NODE_NAMES[1:-1]:
        if node not in walked and is_approval_gate(node):
            continue
        if node not in walked:
            rows.append((node, PhaseState.SKIPPED))
            continue
        index = walked.index(node)
        if index < here:
            rows.append((node, PhaseState.DONE))
        elif index == here:
            waiting = is_human_gate(node) and not walk.decided(node)
            rows.append((node, PhaseState.WAITING if waiting else PhaseState.CURRENT))
        else:
            rows.append((node, PhaseState.AHEAD))
    return rows


def clean_artifacts(names: Iterable[Any]) -> list[str]:
    """Artifact names a session reported, reduced to plain Markdown file names (at most 50)."""
    kept: list[str] = []
    for name in names:
        if (
            isinstance(name, str)
            and name.endswith(".md")
            and 3 < len(name) <= 80
            and all(ch.isalnum() or ch in "._-" for ch in name)
            and not name.startswith(".")
            and name not in kept
        ):
            kept.append(name)
    return sorted(kept)[:50]
