"""`the-loop spawner`: run the devbox agent. `the-loop spawner token create|revoke` are the
App host's commands (they open the App's database, `DATABASE_URL`): an operator mints a
devbox's token where the App runs and hands it to the devbox, which from then on reaches
the App only through its API."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.spawner import DEFAULT_SOCKET

if TYPE_CHECKING:
    from app.config import OperatorConfig
    from app.spawner import SpawnerContext

TOKEN_VARIABLE = "THE_LOOP_SPAWNER_TOKEN"


def run_agent(args: argparse.Namespace) -> int:
    from app.config import ConfigError, load_config, load_settings
    from app.gateway import CREDENTIAL_VARIABLES, open_model_access
    from app.spawner import (
        Agent,
        AgentOptions,
        AppClient,
        CredentialRoutes,
        build_context,
        read_text,
        resolve_routes,
        undumpable,
        url_problem,
        variables_of,
    )

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not one line per long-poll
    undumpable()
    settings = load_settings()
    config = load_config(settings.the_loop_config)  # a config that does not load stops here
    token = spawner_token(args, settings.the_loop_spawner_token)
    # Read once; no child (git, tmux, a session) inherits it from here on.
    os.environ.pop(TOKEN_VARIABLE, None)
    if not token:
        print(
            "the-loop spawner: set THE_LOOP_SPAWNER_TOKEN or --token-file (see `the-loop "
            "spawner token create`)",
            file=sys.stderr,
        )
        return 2
    problem = url_problem(settings.the_loop_url, settings.the_loop_insecure_url)
    if problem is not None:
        print(f"the-loop spawner: {problem}", file=sys.stderr)
        return 2
    problem = sandbox_problem(config, dict(os.environ))
    if problem:
        print(f"the-loop spawner: {problem}", file=sys.stderr)
        return 2
    # The operator's model credentials: read once, for the gateway; no child inherits them.
    launched_with = dict(os.environ)
    for name in CREDENTIAL_VARIABLES:
        os.environ.pop(name, None)
    try:  # the credential routes' secrets: read once, here; no child inherits them either
        routes = resolve_routes(config.routing.sandbox, launched_with, read_text, config.source)
    except ConfigError as exc:
        print(f"the-loop spawner: {exc}", file=sys.stderr)
        return 2
    for name in variables_of(routes):
        os.environ.pop(name, None)
    client = AppClient(settings.the_loop_url, token)
    ctx = build_context(settings, config, client=client, socket=args.tmux_socket)
    ctx.routes = CredentialRoutes(routes, ctx.events.emit) if routes else None
    try:
        live = [r.work_item_id for r in ctx.registry.all() if r.live]
        ctx.models = open_model_access(
            config, launched_with, ctx.events.emit, state_dir=ctx.state_dir, live=live
        )
    except ConfigError as exc:
        print(f"the-loop spawner: {exc}", file=sys.stderr)
        client.close()
        return 2
    report_model_access(ctx)
    options = AgentOptions(
        name=args.name,
        repositories=list(args.repo or []),
        wait=args.wait,
        concurrency=args.concurrency,
        watchdog_interval=args.watchdog_interval,
        max_backoff=args.max_backoff,
        heartbeat=settings.the_loop_spawner_heartbeat_seconds,
    )
    agent = Agent(ctx, client, options)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop.set())
    logging.getLogger(__name__).info(
        "spawner %s serving %s for %s", args.name, settings.the_loop_url, sorted(ctx.hosts)
    )
    try:
        return agent.run()
    finally:
        if ctx.models is not None:
            ctx.models.close()
        client.close()


def report_model_access(ctx: SpawnerContext) -> None:
    """Say how sessions reach the model, warning for each API a hosted harness speaks that
    the gateway has no credential for (such a launch is refused, saying the same)."""
    from app.config import DEFAULT_HARNESS
    from app.spawner import adapter_of

    log = logging.getLogger(__name__)
    if ctx.models is None:
        log.warning("sessions use the shared login directly (routing.sandbox.shareLogin)")
        return
    log.info("model gateway on %s (upstream %s)", ctx.models.gateway.url, ctx.models.upstream)
    keys = {"messages": "routing.sandbox.apiKeyFile", "responses": "routing.sandbox.openaiKeyFile"}
    wires = sorted({adapter_of(name).wire for name in (ctx.hosts or {DEFAULT_HARNESS})})
    for wire in wires:
        missing = ctx.models.missing_credential(wire)
        if missing is not None:
            ctx.events.emit(
                "config.conflict",
                None,
                level="warning",
                key=keys.get(wire, "routing.sandbox"),
                message=missing,
                file=ctx.config.source,
            )


def spawner_token(args: argparse.Namespace, from_env: str | None) -> str:
    """The spawner's credential: the first line of `--token-file`, else the environment's."""
    path = getattr(args, "token_file", None)
    if path:
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            print(f"the-loop spawner: cannot read --token-file: {exc}", file=sys.stderr)
            return ""
    return from_env or ""


def sandbox_problem(config: OperatorConfig, env: dict[str, str]) -> str | None:
    """Why sessions cannot be launched as configured here, or None. With the sandbox off
    only a root spawner is refused (its sessions would run as root); otherwise every launch
    then warns."""
    from app.config import SandboxMode
    from app.spawner import bubblewrap_problem, unconfined_as_root

    if config.routing.sandbox.resolved is SandboxMode.NONE:
        return unconfined_as_root(config.source)
    return bubblewrap_problem(config.source, env)


def create_token(args: argparse.Namespace) -> int:

    from app.config import load_settings
    from app.fleet import TokenError
    from app.fleet import create_token as mint
    from app.store import Sessions, make_engine, migrate

    engine = make_engine(load_settings().database_url)
    try:
        migrate(engine)
        with Sessions(engine)() as session, session.begin():
            token = mint(session, args.name, list(args.repo or []))
    except TokenError as exc:
        print(f"the-loop spawner token create: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.dispose()
    print(token)
    print(
        f"Spawner {args.name!r} created. Keep this token: it is shown once. Run the spawner "
        "with THE_LOOP_SPAWNER_TOKEN set to it.",
        file=sys.stderr,
    )
    return 0


def revoke_token(args: argparse.Namespace) -> int:

    from app.config import load_settings
    from app.fleet import revoke_spawner
    from app.store import Sessions, make_engine, migrate

    engine = make_engine(load_settings().database_url)
    try:
        migrate(engine)
        with Sessions(engine)() as session, session.begin():
            count = revoke_spawner(session, args.name)
    finally:
        engine.dispose()
    if not count:
        print(f"the-loop spawner token revoke: no spawner named {args.name!r}", file=sys.stderr)
        return 1
    print(f"Revoked the token of spawner {args.name!r}; its jobs return to the queue.")
    return 0


def register(subparsers: Any) -> None:
    spawner = subparsers.add_parser(
        "spawner", help="run the devbox agent that starts sessions in tmux"
    )
    spawner.add_argument("--name", default=socket.gethostname(), help="name shown in the App")
    spawner.add_argument(
        "--repo", action="append", metavar="OWNER/REPO", help="serve only these (repeatable)"
    )
    spawner.add_argument("--tmux-socket", default=DEFAULT_SOCKET, help="tmux -L socket name")
    spawner.add_argument(
        "--token-file", help="read the spawner token from this file (not the environment)"
    )
    spawner.add_argument("--wait", type=float, default=25.0, help="long-poll seconds (≤ 30)")
    spawner.add_argument("--concurrency", type=int, default=4, help="jobs run at once")
    spawner.add_argument(
        "--watchdog-interval", type=float, default=5.0, help="seconds between session checks"
    )
    spawner.add_argument(
        "--max-backoff", type=float, default=30.0, help="longest wait between reconnects"
    )
    spawner.set_defaults(func=run_agent)
    commands = spawner.add_subparsers(dest="spawner_command", metavar="COMMAND")
    token = commands.add_parser("token", help="(on the App's host) spawner credentials")
    token_commands = token.add_subparsers(dest="token_command", metavar="COMMAND", required=True)
    create = token_commands.add_parser("create", help="create a spawner and print its token once")
    create.add_argument("--name", required=True, help="the spawner's name")
    create.add_argument(
        "--repo", action="append", metavar="OWNER/REPO", help="allow only these (default: all)"
    )
    create.set_defaults(func=create_token)
    revoke = token_commands.add_parser("revoke", help="withdraw a spawner's token")
    revoke.add_argument("--name", required=True, help="the spawner's name")
    revoke.set_defaults(func=revoke_token)
