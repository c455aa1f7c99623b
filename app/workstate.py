"""`docs/specs/<item>/work-item-state.json`: the portable record in a checkout.

The App's database is the authority; the spawner writes this file when it prepares a checkout
and whenever the App advances the item. The file is agent-writable, so every reader
re-validates what it takes from it. Kept dependency-free: the stop gate imports it on every
turn of every session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

STATE_FILENAME = "work-item-state.json"
CHOICE_KEYS = ("harness", "model", "effort")


def state_path(checkout: Path, spec_id: str) -> Path:
    return checkout / "docs" / "specs" / spec_id / STATE_FILENAME


class WorkItemState:
    """The file's record. A plain class, not a dataclass: importing dataclasses would slow
    the stop gate on every turn (`bench/gate.py`)."""

    __slots__ = (*CHOICE_KEYS, "workItem", "currentNode", "decisions", "parked", "skips")

    def __init__(
        self,
        workItem: str,  # the file's own key names
        currentNode: str = "phase-selection",
        decisions: dict[str, Any] | None = None,
        parked: dict[str, Any] | None = None,
        skips: dict[str, Any] | None = None,
        harness: str = "",
        model: str = "",
        effort: str = "",
    ) -> None:
        self.workItem = workItem
        self.currentNode = currentNode
        self.decisions = decisions if decisions is not None else {}
        self.parked = parked
        self.skips = skips if skips is not None else {}
        self.harness = harness
        self.model = model
        self.effort = effort

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorkItemState) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return f"WorkItemState({self.to_dict()!r})"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WorkItemState:
        """Lenient read: wrong types become empty values; `""` means no choice."""

        def text(key: str, default: str = "") -> str:
            value = data.get(key, default)
            return value if isinstance(value, str) else default

        def mapping(key: str) -> dict[str, Any]:
            value = data.get(key)
            return value if isinstance(value, dict) else {}

        parked = data.get("parked")
        return cls(
            workItem=text("workItem"),
            currentNode=text("currentNode"),
            decisions=mapping("decisions"),
            parked=parked if isinstance(parked, dict) else None,
            skips=mapping("skips"),
            harness=text("harness"),
            model=text("model"),
            effort=text("effort"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The file's shape, in the file's key order."""
        return {
            "workItem": self.workItem,
            "currentNode": self.currentNode,
            "decisions": self.decisions,
            "parked": self.parked,
            "skips": self.skips,
            "harness": self.harness,
            "model": self.model,
            "effort": self.effort,
        }


def read_state(path: Path) -> WorkItemState | None:
    """The state at `path`, or None when missing or not a JSON object."""
    try:
        return parse_state(path.read_text())
    except OSError:
        return None


def parse_state(text: str) -> WorkItemState | None:
    """The state a file's text holds, or None when it is not a JSON object."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return WorkItemState.from_dict(data) if isinstance(data, dict) else None


def write_state(path: Path, state: WorkItemState) -> None:
    """Write atomically, so a reader never sees half a file."""
    from app.files import write_json  # only writers pay for it; the stop gate only reads

    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, state.to_dict(), 0o644)
