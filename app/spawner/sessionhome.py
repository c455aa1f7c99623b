"""A sandboxed session's own home: only what Claude Code needs, copied in before each launch.

The home lives under the spawner's state directory (`homes/<item name>`), persists across
relaunches (Claude Code keeps the conversations `--resume` needs there) and is the only home
the session sees. Before each launch it receives, from the operator's real home:

- `~/.claude.json` without its `projects` (those name other checkouts): the onboarding state,
  the approved API key, the account — merged into the session's own copy, which Claude Code
  writes to as it runs; the trust entries for the checkout are added by `trust.pretrust`;
- `~/.claude/settings.json`, with the stop gate's hook in it (its command runs this Python on
  the project's `hooks/`, both visible inside the sandbox);
- `~/.claude/.credentials.json` (a login), and git's `user.name` / `user.email`.

The merges are pure; every file edit holds the same lock as every other edit of it. A real
file that cannot be read is reported and nothing is taken from it. The session writes its
home, so every write here goes through `app.files`' `…_within` functions: a link it planted
(`~/.claude`, `~/.claude.json`, `.credentials.json` pointing at a host file) is replaced,
never written through, and never read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.commands.hooks import direct_command, install_stop_hook
from app.files import FileLock, write_within
from app.spawner.hostgit import run_git
from app.spawner.trust import (
    TrustFileError,
    claude_config_path,
    claude_settings_path,
    parse_object,
    update_json_file,
)

HOMES = "homes"
CREDENTIALS = ".credentials.json"
GIT_IDENTITY = ("user.name", "user.email")


def home_for(state_dir: Path, name: str) -> Path:
    return state_dir / HOMES / name


def carried_config(real: Mapping[str, Any]) -> dict[str, Any]:
    """What a session takes from the real `~/.claude.json`: everything but `projects`."""
    return {key: value for key, value in real.items() if key != "projects"}


def with_carried(session: dict[str, Any], carried: Mapping[str, Any]) -> dict[str, Any] | None:
    """The session's config with the carried keys set, or None when they already are."""
    if all(session.get(key) == value for key, value in carried.items()):
        return None
    return {**session, **carried}


def session_settings(real: dict[str, Any], gate_command: str) -> dict[str, Any]:
    """The operator's settings with exactly one stop-gate hook, running `gate_command`."""
    settings, _ = install_stop_hook(real, gate_command)
    return settings


def _config_sources(real_home: Path, env: Mapping[str, str]) -> tuple[Path, Path]:
    """(config file, config directory) of the operator's Claude Code."""
    custom = env.get("CLAUDE_CONFIG_DIR")
    if custom:
        base = Path(custom).expanduser()
        return base / ".claude.json", base
    return claude_config_path(real_home), claude_settings_path(real_home).parent


def _read_object(path: Path) -> dict[str, Any]:
    with FileLock(path):
        try:
            return parse_object(path.read_text(), str(path))
        except FileNotFoundError:
            return {}


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


def seed_home(real_home: Path, home: Path, env: Mapping[str, str]) -> list[str]:
    """Bring the session's home up to date from the real one; returns what went wrong."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    config, config_dir = _config_sources(real_home, env)
    failures: list[str] = []
    try:
        carried = carried_config(_read_object(config))
        update_json_file(
            claude_config_path(home), lambda data: with_carried(data, carried), within=home
        )
    except (TrustFileError, OSError) as exc:
        failures.append(f"{config}: {exc}")
    settings = config_dir / "settings.json"
    try:
        wanted = session_settings(_read_object(settings), direct_command())
        update_json_file(
            claude_settings_path(home), lambda data: None if data == wanted else wanted, home
        )
    except (TrustFileError, OSError, ValueError) as exc:
        failures.append(f"{settings}: {exc}")
    credentials = config_dir / CREDENTIALS
    if credentials.is_file():
        try:
            relative = claude_settings_path(home).parent.relative_to(home) / CREDENTIALS
            write_within(home, relative.as_posix(), credentials.read_bytes(), 0o600)
        except OSError as exc:
            failures.append(f"{credentials}: {exc}")
    identity = _git_identity(real_home)
    if identity:
        try:
            write_within(home, ".gitconfig", identity, 0o600)
        except OSError as exc:
            failures.append(f"{home / '.gitconfig'}: {exc}")
    return failures
