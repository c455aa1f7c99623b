"""The stop gate's entry in a harness's settings: the command line a hook runs it with
(`direct_command` for a person's own settings, `managed_command` for a sandboxed session's
managed ones) and the one `Stop` hook added to, or taken from, a Claude Code settings object
(`install_stop_hook`, `uninstall_stop_hook`) with every other key and hook kept as it was.
`the-loop hooks install|uninstall` edits a person's settings file with it; the spawner
writes a session's home and Codex's hooks with it. Not imported by the gate itself.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
from pathlib import Path
from typing import Any

from app.files import write_json
from hooks import stop_gate

GATE_COMMAND = "the-loop-gate"
DEFAULT_TIMEOUT = 30
_OUR_MARKERS = ("the-loop-gate", "the-loop-gate.py", "hooks.stop_gate")
_GATE_FILE_SUFFIX = os.path.join("hooks", "stop_gate.py")


class HooksError(ValueError):
    """The settings file cannot be edited safely; the message says why."""


def is_gate_entry(entry: Any) -> bool:
    """Whether a hook entry runs our stop gate (by any of the names it has gone by)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    try:
        words = shlex.split(entry["command"])
    except ValueError:
        words = entry["command"].split()
    return any(
        Path(word).name in _OUR_MARKERS or word.endswith(_GATE_FILE_SUFFIX) for word in words
    )


def direct_command(python: str = sys.executable) -> str:
    """The default hook line: this interpreter with `-S` on the gate's file.

    Like a console script it names one interpreter (so reinstall after moving it); unlike
    one it needs no PATH lookup and skips site's start-up work.
    """
    return shlex.join([python, "-S", str(Path(stop_gate.__file__).resolve())])


def managed_command(python: str = sys.executable) -> str:
    """The hook line of a sandboxed session's managed settings: the default line, with
    Python's environment variables ignored, told to take the gate's facts from the file the
    spawner binds read-only (`stop_gate.FACTS_AT`) rather than from an environment the
    session can set."""
    gate = str(Path(stop_gate.__file__).resolve())
    # -E: no PYTHONPATH or PYTHONHOME from an `env` the session wrote reaches the gate's imports.
    return shlex.join([python, "-E", "-S", gate, stop_gate.FACTS_FLAG, stop_gate.FACTS_AT])


def _stop_groups(settings: dict[str, Any]) -> list[Any]:
    hooks = settings.get("hooks", {})
    if not isinstance(hooks, dict):
        raise HooksError("its 'hooks' key is not an object")
    groups = hooks.get("Stop", [])
    if not isinstance(groups, list):
        raise HooksError("its 'hooks.Stop' key is not a list")
    return groups


def _without_gate(groups: list[Any]) -> tuple[list[Any], int]:
    """The Stop groups minus our entries; a group left empty by that removal goes too."""
    kept: list[Any] = []
    removed = 0
    for group in groups:
        entries = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(entries, list):
            kept.append(group)
            continue
        others = [e for e in entries if not is_gate_entry(e)]
        removed += len(entries) - len(others)
        if others or not entries:
            kept.append({**group, "hooks": others})
    return kept, removed


def _with_groups(settings: dict[str, Any], groups: list[Any]) -> dict[str, Any]:
    hooks = dict(settings.get("hooks", {}))
    if groups:
        hooks["Stop"] = groups
    else:
        hooks.pop("Stop", None)
    updated = dict(settings)
    if hooks:
        updated["hooks"] = hooks
    else:
        updated.pop("hooks", None)
    return updated


def install_stop_hook(
    settings: dict[str, Any], command: str, timeout: int = DEFAULT_TIMEOUT
) -> tuple[dict[str, Any], bool]:
    """Settings with exactly one stop-gate entry; `changed` is False when it was already so."""
    groups = _stop_groups(settings)
    entry = {"type": "command", "command": command, "timeout": timeout}
    ours = [
        e for g in groups if isinstance(g, dict) for e in g.get("hooks") or [] if is_gate_entry(e)
    ]
    if ours == [entry]:
        return settings, False
    kept, _ = _without_gate(groups)
    return _with_groups(settings, [*kept, {"hooks": [entry]}]), True


def uninstall_stop_hook(settings: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """Settings without any stop-gate entry, and how many were removed."""
    kept, removed = _without_gate(_stop_groups(settings))
    return (_with_groups(settings, kept), removed) if removed else (settings, 0)


def read_settings(path: Path) -> dict[str, Any]:
    """The settings object at `path` (`{}` when there is no file); refuses anything else."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise HooksError(f"cannot read it: {exc.strerror}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise HooksError(f"it is not valid JSON ({exc}); fix or move it, then retry") from exc
    if not isinstance(data, dict):
        raise HooksError("its top level is not a JSON object")
    return data


def write_settings(path: Path, settings: dict[str, Any]) -> None:
    """Replace the file atomically, through a symlink to its target, keeping its mode."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = 0o600
    write_json(target, settings, mode)
