"""A sandboxed session's own home, whatever its harness: where it lies, the stop gate's
facts of each launch, and the operator's git identity it is given.

The home lives under the spawner's state directory (`homes/<item name>`), persists across
relaunches (a harness keeps the conversations a resume needs there) and is the only home the
session sees. What a harness writes into it (Claude Code's `~/.claude.json` and settings,
Codex's config) is its adapter's (`harness/claude_home.py`, `harness/codex.py`). The session
writes its home, so the identity is written through `app.files`' `…_within` functions: a
link it planted is replaced, never written through.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from app.files import write_json, write_within
from app.spawner.workspace.hostgit import run_git

HOMES = "homes"
GATE_FACTS = "gate-facts"  # under the state directory: each launch's stop-gate facts
GIT_IDENTITY = ("user.name", "user.email")


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


def _git_identity(real_home: Path) -> str:
    """`[user]` name and email from the operator's git config, as a git config text."""
    source = real_home / ".gitconfig"
    if not source.is_file():
        return ""
    found = run_git(
        ["config", "--file", str(source), "--get-regexp", r"^user\.(name|email)$"],
        {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(real_home)},
        cwd=real_home,
    ).stdout
    lines = [
        f"\t{key.split('.', 1)[1]} = {value}"
        for key, _, value in (line.partition(" ") for line in found.splitlines())
        if key in GIT_IDENTITY and value
    ]
    return "[user]\n" + "\n".join(lines) + "\n" if lines else ""


def write_git_identity(real_home: Path, home: Path) -> list[str]:
    """The operator's git `user.name` / `user.email` as the session home's `.gitconfig`
    (written without following a link); returns what went wrong."""
    identity = _git_identity(real_home)
    if not identity:
        return []
    try:
        write_within(home, ".gitconfig", identity, 0o600)
    except OSError as exc:
        return [f"{home / '.gitconfig'}: {exc}"]
    return []
