"""`the-loop standing list|start <name>|stop <name>`: the operator's standing sessions.

`start` and `stop` are the running spawner's to do (its control socket): a standing session
is launched where the model gateway mints its pass. With no spawner running they fail and say
how to start one; `list` reads the registry and tmux itself."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from app.spawner import DEFAULT_SOCKET

if TYPE_CHECKING:
    from app.spawner import Request


def _context(args: argparse.Namespace) -> Any:
    from app.config import load_config, load_settings
    from app.spawner import build_context

    settings = load_settings()
    return build_context(
        settings, load_config(settings.the_loop_config), client=None, socket=args.tmux_socket
    )


def run_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from app.spawner import statuses

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


def _ask(command: str, request: Request) -> dict[str, Any] | None:
    """Hand `request` to the running spawner; None (the reason printed) when it refused or
    none runs."""
    from app.config import load_settings
    from app.spawner import ControlError, ask, spawner_state_dir

    try:
        answer = ask(spawner_state_dir(load_settings()), request)
    except ControlError as exc:
        print(f"the-loop standing {command}: {exc}", file=sys.stderr)
        return None
    if not answer.get("ok"):
        print(f"the-loop standing {command}: {answer.get('error', 'refused')}", file=sys.stderr)
        return None
    return answer


def run_start(args: argparse.Namespace) -> int:
    from app.spawner import Request

    answer = _ask("start", Request("start", args.name, args.restart))
    if answer is None:
        return 2
    harness_args = " ".join(str(a) for a in answer.get("harness_args", []))
    print(f"started {args.name}: {harness_args or '(no extra arguments)'}")
    print(f"network: {answer.get('network')}")
    where = f"-L {answer.get('tmux_socket')} attach -t {answer.get('tmux_session')}"
    print(f"attach with: tmux {where}")
    return 0


def run_stop(args: argparse.Namespace) -> int:
    from app.spawner import Request

    answer = _ask("stop", Request("stop", args.name))
    if answer is None:
        return 2
    print(f"stopped {args.name}" if answer.get("killed") else f"{args.name} was not running")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("standing", help="start and stop standing sessions")
    parser.add_argument(
        "--tmux-socket",
        default=DEFAULT_SOCKET,
        help="tmux -L socket name (for list: start and stop use the spawner's)",
    )
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
