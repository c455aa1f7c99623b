"""Running the stop gate as Claude Code runs it, in real git checkouts: the reproduction
state of spec 003, a checkout maker and the subprocess call, shared by the gate's tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# Spec 003's reproduction state, verbatim.
REPRO_STATE: dict[str, Any] = {
    "workItem": "issue-1",
    "currentNode": "phase-selection",
    "decisions": {"phase-selection": {"at": "2026-09-25T00:00:00Z"}},
    "parked": {"node": "phase-selection", "reason": "awaiting a human"},
    "skips": {
        "brainstorming": {"by": "op"},
        "requirements-definition": {"by": "op"},
        "requirements-approval": {"by": "op"},
    },
}
# The approval gates an item runs without (nobody ticked them): the reproduction state
# predates them, so the helpers below add these skips.
NO_STOPS: dict[str, Any] = {"approve-design": {"by": "op"}, "approve-tasks": {"by": "op"}}


def stops_skipped(by: str) -> dict[str, Any]:
    """The skips an execute by `by` records for the approval gates nobody ticked."""
    return {gate: {"by": by} for gate in NO_STOPS}


DESIGN_MISSING = "required artifact is missing (docs/specs/issue-1/design.md)"


def make_checkout(path: Path, state: dict[str, Any] | str | None = None, **files: str) -> Path:
    """A real git checkout with the item's state file (JSON or raw text) and artifacts."""
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    spec = path / "docs" / "specs" / "issue-1"
    spec.mkdir(parents=True)
    if state is not None:
        text = state if isinstance(state, str) else json.dumps(state, indent=1)
        (spec / "work-item-state.json").write_text(text)
    for name, content in files.items():
        (spec / name.replace("_", "-").replace("-md", ".md")).write_text(content)
    return path


def at(node: str, **changes: Any) -> dict[str, Any]:
    """The reproduction state with the pointer moved to `node` (and other keys changed), no
    approval gate ticked."""
    skips = {**NO_STOPS, **changes.pop("skips", REPRO_STATE["skips"])}
    return {**REPRO_STATE, "currentNode": node, "parked": None, "skips": skips, **changes}


def gate(
    tmp_path: Path,
    checkout: Path | None,
    *,
    item: str | None = "issue-1",
    stdin: str | None = None,
    cwd: Path | None = None,
    args: tuple[str, ...] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """Run `python -m hooks.stop_gate` (with `args`) the way Claude Code runs a Stop hook."""
    full_env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": str(tmp_path / "home"),
        "THE_LOOP_STATE_DIR": str(tmp_path / "state"),
        **env,
    }
    if item is not None:
        full_env["THE_LOOP_WORK_ITEM"] = item
    payload = {
        "session_id": "8a1f0c2e-0000-4000-8000-000000000001",
        "transcript_path": str(tmp_path / "transcript.jsonl"),
        "cwd": str(cwd or checkout or tmp_path),
        "hook_event_name": "Stop",
        "stop_hook_active": False,
    }
    return subprocess.run(
        [sys.executable, "-m", "hooks.stop_gate", *args],
        input=json.dumps(payload) if stdin is None else stdin,
        cwd=cwd or checkout or tmp_path,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=30,
    )
