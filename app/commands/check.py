"""`the-loop check <item>`: where a work item stands in the process graph, and what it lacks.

Exit codes: 0 every node up to the item's position is met, 1 something is unmet or the
position is unknown, 2 usage (no item, or a name that is not a work item).

Without `--recompute` the position is the pointer the state file records; with it, the
first node the artifacts leave unmet. `pointer` is reported in both modes, and the table
names it when the two positions differ.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from app import graph

USAGE_EXIT = 2


def _clean(text: object, limit: int = 200) -> str:
    """Agent-writable text made safe for a terminal: printable characters only, bounded."""
    value = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _display_path(path: str, base: Path) -> str:
    try:
        return str(Path(path).relative_to(base))
    except ValueError:
        return path


def _state_line(report: dict[str, Any], base: Path) -> str:
    path = _display_path(report["statePath"], base)
    if not report["stateFound"]:
        return f"  state: none found ({path})"
    pointer, current = report["pointer"], report["currentNode"]
    if pointer not in graph.NODE_NAMES:
        return f"  state: {path} (pointer: {_clean(repr(pointer))} names no node)"
    if pointer != current:
        return f"  state: {path} (pointer: {pointer})"
    return f"  state: {path}"


def _headline(report: dict[str, Any]) -> str:
    item, current = report["workItem"], report["currentNode"]
    if current is None:
        return f"{item}: UNMET (position unknown)"
    return f"{item}: {'ok' if report['ok'] else 'UNMET'} (at {current})"


def render_table(report: dict[str, Any], base: Path) -> str:
    """The human-readable report: headline, state line, then every node.

    Messages are listed for the nodes up to the position; later nodes show their status only.
    """
    lines = [_headline(report), _state_line(report, base)]
    parked = report.get("parked")
    if parked:
        lines.append(f"  parked: {_clean(parked['node'])} ({_clean(parked['reason'])})")
    current = report["currentNode"]
    names = [n["node"] for n in report["nodes"]]
    upto = names.index(current) if current in names else -1
    for index, node in enumerate(report["nodes"]):
        lines.append(f"  {node['status'].upper():<6} {node['node']}")
        if index <= upto and node["status"] not in graph.SATISFIED:
            lines += [f"         · {_clean(m)}" for m in node["messages"]]
    return "\n".join(lines) + "\n"


def run_check(args: argparse.Namespace) -> int:
    item = args.item or os.environ.get("THE_LOOP_WORK_ITEM", "")
    if not item:
        print("the-loop check: name a work item (or set THE_LOOP_WORK_ITEM)", file=sys.stderr)
        return USAGE_EXIT
    if not graph.ITEM_RE.match(item):
        print(f"the-loop check: {item!r} is not a work item name", file=sys.stderr)
        return USAGE_EXIT
    start = Path(args.checkout).expanduser().resolve()
    checkout = graph.find_checkout([start], item) or graph.repository_root(start)
    report = graph.check_checkout(checkout, item, recompute=args.recompute)
    if args.format == "json":
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
    else:
        sys.stdout.write(render_table(report, checkout))
    return 0 if report["ok"] else 1


def register(subparsers: Any) -> None:
    check = subparsers.add_parser(
        "check",
        help="where a work item stands in the process graph",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("item", nargs="?", help="work item (default: $THE_LOOP_WORK_ITEM)")
    check.add_argument(
        "--recompute",
        action="store_true",
        help="position = the first node the artifacts leave unmet (not the recorded pointer)",
    )
    check.add_argument("--format", choices=("table", "json"), default="table")
    check.add_argument(
        "--checkout", default=".", help="a directory inside the checkout (default: here)"
    )
    check.set_defaults(func=run_check)
