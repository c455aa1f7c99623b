"""The phases a human can choose on the checklist, in the process graph's order.

The outer loop is `phase-selection` (the human gate itself) → `brainstorming` (opt-in) →
`requirements-definition` → `design` → `test-planning` → `tasks-breakdown` →
`implementation` → `verification` → `review` → `complete`. Only the skippable phases and
the opt-in phase become checklist rows; the rest always run and are named as such.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PhaseKind(StrEnum):
    SKIPPABLE = "skippable"  # runs unless a human unticks it
    OPT_IN = "opt-in"  # runs only when a human ticks it
    REQUIRED = "required"  # always runs


@dataclass(frozen=True)
class Phase:
    node: str
    label: str
    kind: PhaseKind


PHASES: tuple[Phase, ...] = (
    Phase("brainstorming", "explore the problem before writing requirements", PhaseKind.OPT_IN),
    Phase(
        "requirements-definition",
        "requirements (requirements.md or bugfix.md)",
        PhaseKind.SKIPPABLE,
    ),
    Phase("design", "design (design.md)", PhaseKind.SKIPPABLE),
    Phase("test-planning", "testing plan (testing-plan.md)", PhaseKind.SKIPPABLE),
    Phase("tasks-breakdown", "task list (tasks.md)", PhaseKind.SKIPPABLE),
    Phase("implementation", "implementation", PhaseKind.REQUIRED),
    Phase("verification", "verification", PhaseKind.REQUIRED),
    Phase("review", "review", PhaseKind.REQUIRED),
)

CHOOSABLE: frozenset[str] = frozenset(p.node for p in PHASES if p.kind is not PhaseKind.REQUIRED)


def phases_of(kind: PhaseKind) -> tuple[Phase, ...]:
    return tuple(p for p in PHASES if p.kind is kind)
