"""`the-loop config check [FILE]`: what the App understood of an operator config, what it
adapted from the older daemon's shapes, what it ignores and why, and any conflicts.

A file the App cannot use exits 2 with the key at fault (like every command); a file it can
use exits 0, however many keys it ignores: an ignored key is never an error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.config import OperatorConfig


def _names(values: list[str]) -> str:
    return ", ".join(values) if values else "—"


def understood_rows(config: OperatorConfig) -> list[tuple[str, str]]:
    """(key, what the App makes of it) for every setting that shapes what it does (pure)."""
    from app.config import harness_args

    routing = config.routing
    rows: list[tuple[str, str]] = []
    for h in config.harnesses:
        args = " ".join(harness_args(config, h.name)) or "no launch arguments"
        default = " (default)" if h.default else ""
        rows.append((f"harnesses[{h.name}]", f"runs {h.executable}{default}: {args}"))
    for m in config.models:
        where = f" on {_names(m.harnesses)}" if m.harnesses is not None else ""
        about = f" — {' '.join(m.about.split())}" if m.about else ""
        rows.append((f"models[{m.name}]", f"row model-{m.name}{where}{about}"))
    rows.append(("effort", "rows in this order: " + _names([e.name for e in config.effort])))
    users = routing.authorized_users
    who = _names(users) if users is not None else "anyone with write access to the repository"
    rows.append(("routing.authorizedUsers", f"may execute: {who}"))
    slack = [f"{member} → @{login}" for member, login in config.slack.users.items()]
    rows.append(("slack.users", _names(slack)))
    rows.append(("slack.channel", config.slack.channel or "— (no Slack mirror)"))
    rows.append(("routing.trigger.label", routing.trigger.label))
    rows.append(("execute keyword", routing.trigger.execute_keyword))
    labels = routing.auto_execute_labels
    auto = f"executes when all are on the issue: {_names(labels)}" if labels else "—"
    rows.append(("routing.autoExecuteLabels", auto))
    rows.append(("routing.interaction.mode", config.interaction_mode.value))
    rows.append(("routing.workspace.root", str(routing.workspace.resolved_root)))
    trust = routing.harness_trust
    rows.append(
        (
            "routing.harnessTrust",
            f"enabled={trust.enabled} scope={trust.scope.value} "
            f"acceptBypassPermissions={trust.accept_bypass_permissions}",
        )
    )
    sessions = [s.name for s in config.standing_sessions.sessions]
    rows.append(("standingSessions", _names(sessions)))
    for route in routing.sandbox.routes:  # header names only: a value may be written inline
        added = [*route.headers, *(["basic auth"] if route.basic_auth else [])]
        allows = _names(route.allow) if route.allow else "any method under its path"
        text = f"{route.upstream}, adding {_names(added)}; allows {allows}"
        rows.append((f"routing.sandbox.routes[{route.env}]", text))
    return rows


def _table(title: str, header: tuple[str, str], rows: list[tuple[str, str]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(*header, title=title, title_justify="left", box=None, pad_edge=False)
    for key, text in rows:
        table.add_row(Text(key), Text(text))  # keys such as `models[opus]` are not markup
    return table


def run_check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from app.config import config_findings, load_config
    from app.settings import load_settings

    path = Path(args.file) if args.file else load_settings().the_loop_config
    if not path.expanduser().exists():
        print(f"the-loop: {path} does not exist (the App would run on the defaults)")
        return 2
    config = load_config(path)
    console = Console()
    console.print(Text(f"{config.source}: loads", style="bold"))
    console.print(_table("Understood", ("key", "the App will"), understood_rows(config)))
    sections = (
        ("Read from an older shape", config.adapted),
        ("Ignored", config.ignored),
        ("Conflicts", tuple(config_findings(config))),
    )
    for title, findings in sections:
        rows = [(f.key, f.message) for f in findings]
        console.print()
        if rows:
            console.print(_table(f"{title} ({len(rows)})", ("key", "why"), rows))
        else:
            console.print(f"{title}: none")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("config", help="check the operator config (cli-config.yaml)")
    commands = parser.add_subparsers(dest="config_command", metavar="COMMAND", required=True)
    check = commands.add_parser("check", help="what is understood, adapted and ignored, and why")
    check.add_argument("file", nargs="?", help="the YAML file (default: THE_LOOP_CONFIG)")
    check.set_defaults(func=run_check)
