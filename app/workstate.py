"""`docs/specs/<item>/work-item-state.json`: the portable record in a checkout.

The App's database is the authority; the spawner writes this file when it prepares a checkout
and whenever the App advances the item. The file is agent-writable, so every reader
re-validates what it takes from it. Kept dependency-free: the stop gate imports it on every
turn of every session.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STATE_FILENAME = "work-item-state.json"
CHOICE_KEYS = ("harness", "model", "effort")


def state_path(checkout: Path, spec_id: str) -> Path:
    return checkout / "docs" / "specs" / spec_id / STATE_FILENAME


@dataclass
class WorkItemState:
    workItem: str
    currentNode: str = "phase-selection"
    decisions: dict[str, Any] = field(default_factory=dict)
    parked: dict[str, Any] | None = None
    skips: dict[str, Any] = field(default_factory=dict)
    harness: str = ""
    model: str = ""
    effort: str = ""

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
        return asdict(self)


def read_state(path: Path) -> WorkItemState | None:
    """The state at `path`, or None when missing or not a JSON object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return WorkItemState.from_dict(data) if isinstance(data, dict) else None


def write_state(path: Path, state: WorkItemState) -> None:
    """Write atomically (temp file + rename) so a reader never sees half a file."""
    import tempfile  # only writers pay for it; the stop gate only reads

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".work-item-state.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(state.to_dict(), fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
