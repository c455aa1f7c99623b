"""`the-loop models list|check`: the declared models and effort levels, and whether each runs.

Both print the config's findings first (the conflict between `harnesses[].args` and the
deprecated `routing.harnessArgs`, once, here — never at a spawn). `check` probes every choice
with the base arguments a session gets; `--record` sends the verdicts to the
App (through its spawner API, with this devbox's spawner token) so the gate hides refused
choices; a running spawner forwards them too. It exits 1 when a choice was refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from app.spawner import PROBE_TIMEOUT, Result


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
    from app.config import config_findings, load_config, load_settings
    from app.spawner import hostable_harnesses, plan_probes, verdict_cache

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
    from app.spawner import cached_results

    _settings, _config, cache, probes = _setup()
    _print_results(list(zip(probes, cached_results(probes, cache), strict=True)), args.json)
    return 0


def run_check(args: argparse.Namespace) -> int:
    from app.spawner import AppClient, AppError, SpawnerEvents, Verdict, check, spawner_state_dir

    settings, _config, cache, probes = _setup()
    client = None
    if args.record:
        if not settings.the_loop_spawner_token:
            print(
                "the-loop models check --record: set THE_LOOP_SPAWNER_TOKEN (and THE_LOOP_URL): "
                "verdicts reach the App only through its API",
                file=sys.stderr,
            )
            return 2
        client = AppClient(settings.the_loop_url, settings.the_loop_spawner_token)
    results = check(probes, cache, os.environ, fresh=args.fresh, timeout=args.timeout)
    _print_results([(r.probe, r) for r in results], args.json)
    outbox = SpawnerEvents(spawner_state_dir(settings), client)
    outbox.emit(
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
    if client is not None:
        try:
            outbox.flush()  # the App records the verdicts the gate offers from
        except AppError as exc:
            print(
                f"the-loop models check --record: the App did not take the verdicts: {exc}",
                file=sys.stderr,
            )
            return 2
        finally:
            client.close()
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
        "--record",
        action="store_true",
        help="send the verdicts to the App now (THE_LOOP_URL, THE_LOOP_SPAWNER_TOKEN)",
    )
    probe.add_argument("--timeout", type=float, default=PROBE_TIMEOUT, help="seconds per probe")
    probe.add_argument("--json", action="store_true")
    probe.set_defaults(func=run_check)
