"""`the-loop sessions`: what this devbox's spawner launched, and what tmux says about it now."""

from __future__ import annotations

import argparse
import json
from typing import Any

from app.spawner import DEFAULT_SOCKET


def pane_state(record: Any, panes: dict[str, Any]) -> str:
    """What tmux shows for a record: `alive`, `dead (status N)` or `gone`."""
    pane = panes.get(record.tmux_session)
    if pane is None:
        return "gone"
    if pane.dead:
        return f"dead (status {pane.status})" if pane.status is not None else "dead"
    return "alive"


def run_sessions(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from app.config import load_settings
    from app.spawner import TmuxRunner, registry_for

    records = registry_for(load_settings()).all()
    if not args.all:
        records = [r for r in records if r.live]
    panes = TmuxRunner(args.tmux_socket).panes()
    if args.json:
        for record in records:
            print(json.dumps({**record.to_dict(), "pane": pane_state(record, panes)}))
        return 0
    table = Table(
        "work item",
        "state",
        "pane",
        "harness",
        "model",
        "effort",
        "harness args",
        "session id",
        "tmux",
        "updated",
        box=None,
        pad_edge=False,
    )
    for r in sorted(records, key=lambda r: r.updated_at, reverse=True):
        state = f"{r.state} ({r.stall})" if r.stall else r.state
        table.add_row(
            r.work_item_id,
            state,
            pane_state(r, panes),
            r.harness,
            r.model or "-",
            r.effort or "-",
            " ".join(r.harness_args) or "-",
            r.session_id,
            r.tmux_target,
            r.updated_at[:19],
        )
    Console().print(table)
    if not records:
        Console().print("no sessions" + ("" if args.all else " (use --all for ended ones)"))
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("sessions", help="the sessions this devbox launched")
    parser.add_argument("--all", action="store_true", help="include exited and stopped ones")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    parser.add_argument("--tmux-socket", default=DEFAULT_SOCKET, help="tmux -L socket name")
    parser.set_defaults(func=run_sessions)
