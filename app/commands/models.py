"""`the-loop models list|check`: the declared models and effort levels, and whether each runs.

Both print the config's findings first (the conflict between `harnesses[].args` and the
deprecated `routing.harnessArgs`, once, here — never at a spawn). `check` probes every choice
with the base arguments a session gets; `--record` writes the verdicts into the App's
database so the gate hides refused choices. It exits 1 when a choice was refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from app.spawner.probes import PROBE_TIMEOUT, Result


def _print_results(rows: Sequence[tuple[Any, Result | None]], as_json: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    if as_json:
        for probe, result in rows:
            print(
                json.dumps(
                    {
                        "harness": probe.harness,
                        "kind": probe.kind.value,
                        "name": probe.name,
                        "argv": list(probe.argv),
                        "verdict": result.verdict.value if result else None,
                        "detail": result.detail if result else "",
                        "cached": result.cached if result else False,
                    }
                )
            )
        return
    table = Table("harness", "choice", "verdict", "argv probed", "detail", box=None)
    for probe, result in rows:
        verdict = result.verdict.value + (" (cached)" if result.cached else "") if result else "-"
        table.add_row(
            probe.harness,
            probe.token,
            verdict,
            " ".join(probe.argv),
            result.detail if result else "not probed yet",
        )
    Console().print(table)


def _setup() -> tuple[Any, Any, Any, list[Any]]:
    from app.config import config_findings, load_config
    from app.settings import load_settings
    from app.spawner.agent import hostable_harnesses
    from app.spawner.assembly import verdict_cache
    from app.spawner.probes import plan_probes

    settings = load_settings()
    config = load_config(settings.the_loop_config)
    for finding in config_findings(config):
        print(f"{config.source}: {finding.key}: {finding.message}", file=sys.stderr)
    hosts = hostable_harnesses(config, os.environ)
    if not hosts:
        print("no declared harness can run here (is its executable on PATH?)", file=sys.stderr)
    probes = plan_probes(config, hosts)
    if hosts and not probes:
        print(f"{config.source}: no models or effort levels are declared", file=sys.stderr)
    return settings, config, verdict_cache(settings), probes


def run_list(args: argparse.Namespace) -> int:
    from app.spawner.probes import cached_results

    _settings, _config, cache, probes = _setup()
    _print_results(list(zip(probes, cached_results(probes, cache), strict=True)), args.json)
    return 0


def record_verdicts(database_url: str, results: Sequence[Result]) -> None:
    """Write verdicts where the gate reads them (one row per checklist token)."""
    from sqlalchemy.orm import Session

    from app.store import make_engine, migrate
    from app.store.tables import ModelVerdict

    engine = make_engine(database_url)
    try:
        migrate(engine)
        with Session(engine) as session, session.begin():
            for r in results:
                session.merge(
                    ModelVerdict(
                        token=r.probe.token,
                        verdict=r.verdict.value,
                        harness=r.probe.harness,
                        detail=r.detail,
                        probed_at=datetime.now(UTC),
                    )
                )
    finally:
        engine.dispose()


def run_check(args: argparse.Namespace) -> int:
    from app.spawner.assembly import spawner_state_dir
    from app.spawner.eventqueue import SpawnerEvents
    from app.spawner.probes import Verdict, check

    settings, _config, cache, probes = _setup()
    results = check(probes, cache, os.environ, fresh=args.fresh, timeout=args.timeout)
    _print_results([(r.probe, r) for r in results], args.json)
    SpawnerEvents(spawner_state_dir(settings)).emit(
        "models.checked",
        None,
        verdicts=[
            {
                "harness": r.probe.harness,
                "token": r.probe.token,
                "verdict": r.verdict.value,
                "detail": r.detail,
                "argv": list(r.probe.argv),
            }
            for r in results
        ],
    )
    if args.record:
        record_verdicts(settings.database_url, results)
    return 1 if any(r.verdict is Verdict.REFUSED for r in results) else 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("models", help="declared models/effort levels and verdicts")
    commands = parser.add_subparsers(dest="models_command", metavar="COMMAND", required=True)
    listing = commands.add_parser("list", help="what is declared, with cached verdicts")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=run_list)
    probe = commands.add_parser("check", help="probe each choice with the session's base args")
    probe.add_argument("--fresh", action="store_true", help="ignore cached verdicts")
    probe.add_argument(
        "--record", action="store_true", help="write verdicts to the App's database (DATABASE_URL)"
    )
    probe.add_argument("--timeout", type=float, default=PROBE_TIMEOUT, help="seconds per probe")
    probe.add_argument("--json", action="store_true")
    probe.set_defaults(func=run_check)
