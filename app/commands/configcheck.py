"""`the-loop config check [FILE]`: what the App understood of an operator config, what is in
force for money, reach and isolation (and from where), what it adapted from the older
daemon's shapes, which of the older daemon's keys it ignores and why, and any conflicts.

A file the App cannot use exits 2 naming every problem at once, one line each with its key:
values it refuses and keys it does not know (with the key likely meant). The older daemon's
keys the App does not use are listed, never an error. Without FILE and with no file at
THE_LOOP_CONFIG, the defaults are shown as what is in force.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
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
    pull = "every authorized comment" if routing.pull_comments == "all" else "only those to the App"
    rows.append(
        ("routing.pullComments", f"{routing.pull_comments.value}: {pull} reach the session")
    )
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
    rows += network_rows(config)
    sessions = [s.name for s in config.standing_sessions.sessions]
    rows.append(("standingSessions", _names(sessions)))
    for route in routing.sandbox.routes:  # header names only: a value may be written inline
        added = [*route.headers, *(["basic auth"] if route.basic_auth else [])]
        allows = _names(route.allow) if route.allow else "any method under its path"
        text = f"{route.upstream}, adding {_names(added)}; allows {allows}"
        rows.append((f"routing.sandbox.routes[{route.env}]", text))
    return rows


def network_rows(config: OperatorConfig) -> list[tuple[str, str]]:
    """What a closed network's session may reach: egress (each preset as it expands on this
    devbox, read from its tools' configuration) and the relayed services."""
    import os

    from app.spawner import describe_presets, read_registries

    sandbox = config.routing.sandbox
    rows = [("routing.sandbox.egress", _names(list(sandbox.egress)))]
    presets = describe_presets(read_registries(os.environ), sandbox.egress)
    rows += [(f"routing.sandbox.egress[{preset}]", hosts) for preset, hosts in presets]
    rows.append(("routing.sandbox.services", _names(list(sandbox.services))))
    return rows


def _table(title: str, header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(*header, title=title, title_justify="left", box=None, pad_edge=False)
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))  # keys such as `models[opus]` are not markup
    return table


def in_force_table(config: OperatorConfig) -> Any:
    """The settings that govern money, reach and isolation, as a rich table (`doctor` too)."""
    from app.config import in_force

    rows = [(r.key, r.value, r.source) for r in in_force(config)]
    return _table("In force", ("setting", "value", "from"), rows)


def _defaults(console: Any, path: Path) -> int:
    from app.config import OperatorConfig

    console.print(f"{path} does not exist: the App runs on the defaults")
    console.print(in_force_table(OperatorConfig(source=str(path))))
    return 0


def run_check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from app.config import config_findings, load_config, load_settings

    path = Path(args.file) if args.file else load_settings().the_loop_config
    console = Console()
    if not path.expanduser().exists():
        if not args.file:
            return _defaults(console, path)
        print(f"the-loop: {path} does not exist (the App would run on the defaults)")
        return 2
    config = load_config(path)
    console.print(Text(f"{config.source}: loads", style="bold"))
    console.print(_table("Understood", ("key", "the App will"), understood_rows(config)))
    console.print()
    console.print(in_force_table(config))
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
    check = commands.add_parser(
        "check", help="what is understood and in force, adapted and ignored, and why"
    )
    check.add_argument("file", nargs="?", help="the YAML file (default: THE_LOOP_CONFIG)")
    check.set_defaults(func=run_check)
    reference = commands.add_parser(
        "reference", help="every variable and key, its default and meaning (Markdown)"
    )
    reference.set_defaults(func=run_reference)


def run_reference(args: argparse.Namespace) -> int:
    from app.commands.configref import reference_markdown

    print(reference_markdown(), end="")
    return 0
