"""`the-loop hooks install|uninstall`: the stop gate in Claude Code's user settings.

Edits `~/.claude/settings.json` (or `$CLAUDE_CONFIG_DIR/settings.json`, or `--settings`):
adds one `Stop` hook running the gate, keeps every other key and hook as it was, and writes
atomically with the file's mode. The default hook line runs the gate's file with this
installation's Python and `-S`, skipping site's start-up work, which on a heavily provisioned
interpreter costs more than the gate; `--command the-loop-gate` uses the console script.
Running install twice changes nothing; a settings file that is not valid JSON is never
overwritten; the edit holds the same lock as every other edit of the file by the-loop. The
entry and the edit are `hooks/gate_entry.py`'s, which the spawner uses too.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from app.files import FileLock
from hooks.gate_entry import (
    DEFAULT_TIMEOUT,
    HooksError,
    direct_command,
    install_stop_hook,
    read_settings,
    uninstall_stop_hook,
    write_settings,
)


def default_settings_path(env: dict[str, str]) -> Path:
    base = env.get("CLAUDE_CONFIG_DIR") or "~/.claude"
    return Path(base).expanduser() / "settings.json"


def _settings_path(args: Any) -> Path:
    return (
        Path(args.settings).expanduser()
        if args.settings
        else default_settings_path(dict(os.environ))
    )


def run_install(args: Any) -> int:
    path = _settings_path(args)
    if args.command is None:
        args.command = direct_command()
    if not args.command.strip() or args.timeout < 1:
        print("the-loop: --command must be non-empty and --timeout at least 1", file=sys.stderr)
        return 2
    try:
        with FileLock(Path(os.path.realpath(path))):
            updated, changed = install_stop_hook(read_settings(path), args.command, args.timeout)
            if changed:
                write_settings(path, updated)
    except (HooksError, OSError) as exc:
        print(f"the-loop: not changing {path}: {exc}", file=sys.stderr)
        return 2
    state = "installed" if changed else "already installed"
    print(f"the stop gate is {state} in {path} (command: {args.command})")
    program = shlex.split(args.command)[0] if args.command.strip() else ""
    if program and not shutil.which(program):
        print(f"warning: {program} is not on PATH here; Claude Code will not find it")
    return 0


def run_uninstall(args: Any) -> int:
    path = _settings_path(args)
    try:
        with FileLock(Path(os.path.realpath(path))):
            updated, removed = uninstall_stop_hook(read_settings(path))
            if removed:
                write_settings(path, updated)
    except (HooksError, OSError) as exc:
        print(f"the-loop: not changing {path}: {exc}", file=sys.stderr)
        return 2
    print(f"removed {removed} stop gate hook(s) from {path}" if removed else "nothing to remove")
    return 0


def register(subparsers: Any) -> None:
    hooks = subparsers.add_parser("hooks", help="install the stop gate in Claude Code")
    actions = hooks.add_subparsers(dest="hooks_command", metavar="ACTION", required=True)
    for name, func, text in (
        ("install", run_install, "add the Stop hook to Claude Code's user settings"),
        ("uninstall", run_uninstall, "remove it"),
    ):
        parser = actions.add_parser(name, help=text, description=text)
        parser.add_argument(
            "--settings",
            help="default: ~/.claude/settings.json, or $CLAUDE_CONFIG_DIR/settings.json",
        )
        if name == "install":
            parser.add_argument(
                "--command",
                help="what the hook runs (default: this Python with -S on the gate's file; "
                "`the-loop-gate` uses the console script found on PATH)",
            )
            parser.add_argument(
                "--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds (default 30)"
            )
        parser.set_defaults(func=func)
