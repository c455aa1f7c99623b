"""`the-loop checks` and `the-loop checks log <id>`: the CI of a session's pull request.

Inside a session (`THE_LOOP_WORK_ITEM_ID`, `THE_LOOP_URL`, `THE_LOOP_SESSION_TOKEN`), once the
pull request is open: `the-loop checks` lists the failing check runs on its head commit (id,
name, conclusion); `the-loop checks log <id>` prints the end of that run's GitHub Actions job
log — its last 2,000 lines, at most 256 KiB — which the App reads from GitHub for the session.
Only check runs of the pull request's head commit can be read.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from app.commands.agent_tools import ask_app
from app.gate import FAILING_CONCLUSIONS


def _others(runs: list[dict[str, Any]]) -> str:
    counted = Counter(
        str(run.get("conclusion") or "") if run.get("status") == "completed" else "running"
        for run in runs
    )
    return ", ".join(f"{n} {word or 'done'}" for word, n in sorted(counted.items()))


def describe_checks(shown: dict[str, Any]) -> str:
    """What `the-loop checks` prints: one line per failing check run, then the rest
    counted (pure)."""
    pr = shown.get("pull_request") or {}
    runs = [r for r in shown.get("check_runs") or [] if isinstance(r, dict)]
    failing = [r for r in runs if r.get("conclusion") in FAILING_CONCLUSIONS]
    others = [r for r in runs if r not in failing]
    where = f"pull request #{pr.get('number')} at {str(pr.get('head_sha') or '')[:12]}"
    if not failing:
        lines = [f"No failing checks on {where}."]
    else:
        lines = [f"Failing checks on {where}:"]
        for run in failing:
            line = f"  {run.get('id')}  {run.get('name')}  {run.get('conclusion')}"
            if run.get("title"):
                line += f" — {run['title']}"
            lines.append(line)
    if others:
        lines.append(f"Other checks: {_others(others)}.")
    if failing:
        lines.append("A failing job's log: `the-loop checks log <id>`.")
    return "\n".join(lines) + "\n"


def describe_log(shown: dict[str, Any]) -> str:
    """What `the-loop checks log <id>` prints: a line naming the run and what is shown of its
    log, then the log's end (pure)."""
    run = shown.get("check_run") or {}
    lines = int(shown.get("lines") or 0)
    head = f"Log of check run {run.get('id')} ({run.get('name')}: {run.get('conclusion')})"
    if shown.get("cut"):
        head += f", its last {lines} lines (the earlier lines are left out)"
    if shown.get("incomplete"):
        head += "; the log was too large to read to its end, so this is not its end"
    text = str(shown.get("log") or "")
    return f"{head}:\n{text}" if text else f"{head}: the log is empty.\n"


def run(args: argparse.Namespace) -> int:
    if args.action == "log":
        shown = ask_app("checks", lambda client, item: client.check_log(item, args.id))
        if isinstance(shown, int):
            return shown
        sys.stdout.write(describe_log(shown))
        return 0
    listed = ask_app("checks", lambda client, item: client.check_runs(item))
    if isinstance(listed, int):
        return listed
    sys.stdout.write(describe_checks(listed))
    return 0


def register(subparsers: Any) -> None:
    checks = subparsers.add_parser(
        "checks",
        help="(inside a session) the failing checks of the pull request; `log <id>` a job's log",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    checks.set_defaults(func=run, action="list")
    actions = checks.add_subparsers(dest="action", metavar="ACTION")
    log = actions.add_parser("log", help="the end of a failing check run's job log")
    log.add_argument("id", type=int, help="the check run's id, as `the-loop checks` lists it")
    log.set_defaults(func=run, action="log")
