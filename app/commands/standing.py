"""`the-loop standing list|start <name>|stop <name>`: the operator's standing sessions."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from app.spawner.session.tmux import DEFAULT_SOCKET


def _context(args: argparse.Namespace) -> Any:
    from app.config import load_config
    from app.settings import load_settings
    from app.spawner.assembly import build_context

    settings = load_settings()
    return build_context(
        settings, load_config(settings.the_loop_config), client=None, socket=args.tmux_socket
    )


def run_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from app.spawner.standing_sessions import statuses

    table = Table("name", "state", "harness", "harness args", "cwd", "session id", box=None)
    for status in statuses(_context(args)):
        record = status.record
        state = "running" if status.alive else (record.state if record else "not started")
        table.add_row(
            status.entry.name,
            state,
            record.harness if record else "",
            " ".join(record.harness_args) if record else "",
            str(status.entry.cwd),
            record.session_id if record else "",
        )
    Console().print(table)
    return 0


def run_start(args: argparse.Namespace) -> int:
    from app.spawner import standing_sessions as standing

    try:
        record = standing.start(_context(args), args.name, restart=args.restart)
    except standing.StandingError as exc:
        print(f"the-loop standing start: {exc}", file=sys.stderr)
        return 2
    print(f"started {args.name}: {' '.join(record.harness_args) or '(no extra arguments)'}")
    print(f"attach with: tmux -L {args.tmux_socket} attach -t {record.tmux_session}")
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from app.spawner import standing_sessions as standing

    try:
        killed = standing.stop(_context(args), args.name)
    except standing.StandingError as exc:
        print(f"the-loop standing stop: {exc}", file=sys.stderr)
        return 2
    print(f"stopped {args.name}" if killed else f"{args.name} was not running")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("standing", help="start and stop standing sessions")
    parser.add_argument("--tmux-socket", default=DEFAULT_SOCKET, help="tmux -L socket name")
    commands = parser.add_subparsers(dest="standing_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="declared standing sessions and their state")
    listing.set_defaults(func=run_list)
    start = commands.add_parser("start", help="start a declared standing session")
    start.add_argument("name")
    start.add_argument("--restart", action="store_true", help="replace a running one")
    start.set_defaults(func=run_start)
    stop = commands.add_parser("stop", help="stop a standing session")
    stop.add_argument("name")
    stop.set_defaults(func=run_stop)
