"""The phases a human can choose on the checklist, taken from the process graph.

The graph (`app.graph.NODES`) says which nodes are skippable and which are opt-in; the gate
adds only the human-readable label of each row. The start node (this gate itself) and the
terminal node are not phases; every other node that cannot be skipped always runs. The
approval gates are rows of their own kind: a stop after a phase, not a phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.graph import NODES, Node


class PhaseKind(StrEnum):
    SKIPPABLE = "skippable"  # runs unless a human unticks it
    OPT_IN = "opt-in"  # runs only when a human ticks it
    REQUIRED = "required"  # always runs
    GATE = "gate"  # an approval stop: only when a human (or the operator's default) ticks it


@dataclass(frozen=True)
class Phase:
    node: str
    label: str
    kind: PhaseKind


LABELS = {
    "brainstorming": "explore the problem before writing requirements",
    "requirements-definition": "requirements (requirements.md or bugfix.md)",
    "design": "design (design.md)",
    "test-planning": "testing plan (testing-plan.md)",
    "tasks-breakdown": "task list (tasks.md)",
    "approve-design": "stop for your approval after the design (design.md)",
    "approve-tasks": "stop for your approval after the task list (tasks.md)",
}


def _kind(node: Node) -> PhaseKind:
    if node.human_gate and node.skippable:
        return PhaseKind.GATE
    if node.opt_in:
        return PhaseKind.OPT_IN
    return PhaseKind.SKIPPABLE if node.skippable else PhaseKind.REQUIRED


PHASES: tuple[Phase, ...] = tuple(
    Phase(node.name, LABELS.get(node.name, node.name), _kind(node)) for node in NODES[1:-1]
)

CHOOSABLE: frozenset[str] = frozenset(p.node for p in PHASES if p.kind is not PhaseKind.REQUIRED)
