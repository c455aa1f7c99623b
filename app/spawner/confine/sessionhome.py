"""A sandboxed session's own home, whatever its harness: where it lies and the stop gate's
facts of each launch.

The home lives under the spawner's state directory (`homes/<item name>`), persists across
relaunches (a harness keeps the conversations a resume needs there) and is the only home the
session sees. What a harness writes into it (Claude Code's `~/.claude.json` and settings,
Codex's config) is its adapter's (`harness/claude_home.py`, `harness/codex.py`); the
operator's git identity it is given is `workspace/gitidentity.py`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from app.files import write_json

HOMES = "homes"
GATE_FACTS = "gate-facts"  # under the state directory: each launch's stop-gate facts


def home_for(state_dir: Path, name: str) -> Path:
    return state_dir / HOMES / name


def write_gate_facts(state_dir: Path, slug: str, facts: Mapping[str, str]) -> Path:
    """The stop gate's facts for one launch (`<state dir>/gate-facts/<slug>.json`), which
    the sandbox shows read-only at `stop_gate.FACTS_AT`: what the gate decides by, where
    the session cannot write it (its environment it can set, through any settings file's
    `env`). No work item in them: no gate (a standing session)."""
    path = state_dir / GATE_FACTS / f"{slug}.json"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_json(path, dict(facts), 0o644)
    return path
