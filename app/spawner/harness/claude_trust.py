"""Pre-trusting a checkout for Claude Code, so an unattended session never stops at the
workspace trust dialog or the bypass-permissions disclaimer.

Claude Code reads `hasTrustDialogAccepted` twice: once walking up from the working directory
and once for the exact directory only (the gate that decides whether the dialog is shown and
whether a repository's own `.claude/settings.json` grants load). So both keys are always
written on the exact spawn directory; `scope: workspace-root` only widens trust to the
workspace root as well. Claude Code rewrites `~/.claude.json` while it runs, so the file is
always merged, never replaced, and several launches at once take turns (an exclusive lock
around each read-modify-write); an unreadable file is reported and left untouched.

The edit functions are pure; `pretrust` is the thin I/O around them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.config import HarnessTrust, TrustScope
from app.files import KEPT_FILE_MODE, FileLock, json_text, update_within, write_json
from app.spawner.harness import TrustOutcome
from app.spawner.spawner_errors import SpawnerError

TRUST_KEY = "hasTrustDialogAccepted"
ONBOARDING_KEY = "hasCompletedProjectOnboarding"
BYPASS_SETTING = "skipDangerousModePermissionPrompt"
BYPASS_FLAG = "--dangerously-skip-permissions"  # the launch argument the disclaimer guards
ACCEPT_AUTO = "auto"
NEW_FILE_MODE = 0o600


class TrustFileError(SpawnerError, ValueError):
    """A Claude Code config file exists but is not a JSON object we can safely merge into."""


@dataclass(frozen=True)
class TrustPlan:
    """Which directories to trust: the spawn directory first, then any widening."""

    spawn_dir: str
    wider: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def directories(self) -> list[str]:
        return [self.spawn_dir, *self.wider]


def plan_trust(spawn_dir: Path, root: Path, scope: TrustScope, home: Path) -> TrustPlan:
    """Decide what to trust. Paths are taken as given (the caller resolves them).

    `workspace-root` adds the root only when it contains the spawn directory and is neither
    `/` nor `$HOME` (those would trust far more than the operator's work); each refusal
    degrades to per-directory trust with a warning.
    """
    if scope is not TrustScope.WORKSPACE_ROOT:
        return TrustPlan(str(spawn_dir))
    if root in (Path("/"), home):
        why = f"workspace root {root} is {'/' if root == Path('/') else '$HOME'}"
        return TrustPlan(str(spawn_dir), warnings=(f"{why}; trusting only {spawn_dir}",))
    if root == spawn_dir or root not in spawn_dir.parents:
        warning = f"workspace root {root} does not contain {spawn_dir}; trusting only {spawn_dir}"
        return TrustPlan(str(spawn_dir), warnings=(warning,))
    return TrustPlan(str(spawn_dir), wider=(str(root),))


def _project(projects: dict[str, Any], directory: str) -> dict[str, Any]:
    entry = projects.get(directory, {})
    if not isinstance(entry, dict):
        raise TrustFileError(f"projects[{directory!r}] is not an object")
    return entry


def with_trust(data: dict[str, Any], plan: TrustPlan) -> dict[str, Any] | None:
    """`data` with the plan's keys set, or None when every key already holds.

    The spawn directory gets both keys; a wider directory gets the trust key (onboarding is
    not inherited by Claude Code, so it only matters on the directory a session runs in).
    """
    projects = data.get("projects", {})
    if not isinstance(projects, dict):
        raise TrustFileError("projects is not an object")
    wanted: dict[str, tuple[str, ...]] = {plan.spawn_dir: (TRUST_KEY, ONBOARDING_KEY)}
    wanted.update({directory: (TRUST_KEY,) for directory in plan.wider})
    changed: dict[str, dict[str, Any]] = {}
    for directory, keys in wanted.items():
        entry = _project(projects, directory)
        if any(entry.get(key) is not True for key in keys):
            changed[directory] = {**entry, **dict.fromkeys(keys, True)}
    if not changed:
        return None
    return {**data, "projects": {**projects, **changed}}


def with_bypass_accepted(settings: dict[str, Any]) -> dict[str, Any] | None:
    """`settings` with the bypass disclaimer pre-accepted, or None when it already is."""
    if settings.get(BYPASS_SETTING) is True:
        return None
    return {**settings, BYPASS_SETTING: True}


def has_bypass_flag(args: Sequence[str]) -> bool:
    """True when the resolved launch arguments ask for the bypass-permissions mode."""
    return BYPASS_FLAG in args


def should_accept_bypass(trust: HarnessTrust, launch_args: Sequence[str]) -> bool:
    """`acceptBypassPermissions: auto` pre-accepts only when the resolved arguments carry the
    bypass flag; any other value never does (nothing is pre-accepted on a guess)."""
    auto = trust.accept_bypass_permissions == ACCEPT_AUTO
    return trust.enabled and auto and has_bypass_flag(launch_args)


def parse_object(text: str, source: str) -> dict[str, Any]:
    """Decode a config file that must hold a JSON object; empty text reads as `{}`."""
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TrustFileError(f"{source} is not valid JSON ({exc.msg}, line {exc.lineno})") from exc
    if not isinstance(data, dict):
        raise TrustFileError(f"{source} does not hold a JSON object")
    return data


def update_json_file(
    path: Path,
    edit: Callable[[dict[str, Any]], dict[str, Any] | None],
    within: Path | None = None,
) -> bool:
    """Merge `edit` into the JSON object at `path`; True when the file was written.

    The read, the edit and the write happen under `FileLock`, so concurrent launches never
    lose each other's entries. Atomic (temp file, then rename) and keeps the file's mode.
    In the operator's own home a symlink is written through to its target (dotfiles kept
    elsewhere stay linked); under `within` (a session's home, which the session writes)
    no link is followed: a linked file reads as absent and is replaced, a linked directory
    is replaced by a real one. Raises `TrustFileError` for a file that cannot be merged (it
    is left as it was), and `OSError` for a failed read or write.
    """
    if within is not None:

        def merged(text: str) -> str | None:
            updated = edit(parse_object(text, str(path)))
            return None if updated is None else json_text(updated)

        return update_within(within, path.relative_to(within).as_posix(), merged, NEW_FILE_MODE)
    target = Path(os.path.realpath(path))
    with FileLock(target):
        try:
            text = target.read_text()
            mode = target.stat().st_mode & KEPT_FILE_MODE
        except FileNotFoundError:
            text, mode = "", NEW_FILE_MODE
        updated = edit(parse_object(text, str(path)))
        if updated is None:
            return False
        write_json(target, updated, mode)
    return True


def claude_config_path(home: Path) -> Path:
    return home / ".claude.json"


def claude_settings_path(home: Path) -> Path:
    return home / ".claude" / "settings.json"


def pretrust(
    home: Path,
    spawn_dir: Path,
    workspace_root: Path,
    trust: HarnessTrust,
    launch_args: Sequence[str],
    *,
    session_home: bool = False,
) -> TrustOutcome:
    """Pre-trust `spawn_dir` (and pre-accept the bypass disclaimer when due) for `home`;
    `session_home` says `home` is a sandboxed session's own, where no link is followed.

    Never raises for a file problem: a failure is recorded in the outcome and the spawn goes
    on (the session may then stop at a dialog, which the watchdog reports).
    """
    outcome = TrustOutcome()
    if not trust.enabled:
        return outcome
    spawn = spawn_dir.resolve()
    plan = plan_trust(spawn, workspace_root.expanduser().resolve(), trust.scope, home.resolve())
    outcome.warnings.extend(plan.warnings)
    config = claude_config_path(home)
    within = home if session_home else None
    try:
        outcome.written = update_json_file(config, lambda data: with_trust(data, plan), within)
        outcome.directories = plan.directories
    except (TrustFileError, OSError) as exc:
        outcome.failures.append(f"{config}: {exc}")
    if should_accept_bypass(trust, launch_args):
        settings = claude_settings_path(home)
        try:
            update_json_file(settings, with_bypass_accepted, within)
            outcome.bypass_accepted = True
        except (TrustFileError, OSError) as exc:
            outcome.failures.append(f"{settings}: {exc}")
    return outcome
