"""`the-loop serve` (the App under gunicorn), `the-loop worker` (inbox worker only) and
`the-loop up` (everything on one machine: App, worker, local spawner).

The App runs on gunicorn's asgi worker (`app.runtime.asgi`): webhooks are acknowledged on the event
loop and the Flask routes run on `--threads` threads behind it. Every one of these processes
is non-dumpable, so no other process of the user can read its memory or environment.

`up` says how sessions are confined before it starts: in a bubblewrap sandbox (the default,
`routing.sandbox.mode: bubblewrap`), or — only when `cli-config.yaml` says `mode: none` —
unconfined, with a warning. Without a working `bwrap` it refuses to start, with one line.
While no GitHub App is configured it prints what to do next, the lines the status page shows."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gunicorn.app.base import BaseApplication

# Seconds a thread may keep the GIL while another waits for it (Python's default: 0.005).
# The event loop, the ingest writer and the inbox workers take turns with it, so a batch
# committed in C waited up to a whole interval to wake its requests, and a request as long
# to be read; `bench/ingest.py --routed` acknowledges more deliveries a second at 1 ms.
GIL_SWITCH_INTERVAL = 0.001


class _Gunicorn(BaseApplication):
    """Runs the App (`app.runtime.create_asgi_app`) under gunicorn's arbiter, options in
    code."""

    def __init__(self, options: dict[str, Any], wsgi_threads: int) -> None:
        self.options = options
        self.wsgi_threads = wsgi_threads
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        """Build the App in the worker process, which takes GIL turns of GIL_SWITCH_INTERVAL
        and is batch work for the scheduler (`batch_scheduling`), threads included."""
        from app.runtime import create_asgi_app

        sys.setswitchinterval(GIL_SWITCH_INTERVAL)
        batch_scheduling()
        return create_asgi_app(wsgi_threads=self.wsgi_threads)


def batch_scheduling() -> None:
    """Mark the calling thread, and every thread it starts from now on, as batch work for
    Linux's scheduler (SCHED_BATCH): a thread that wakes waits for the running one's turn to
    end rather than preempting it.

    Under a flood the ingest writer, the inbox workers and the other worker process kept
    waking and preempting the event loop, often only to find the GIL held and sleep again,
    and each switch cost both threads their caches (`/proc/<pid>/task/*/status` counts the
    involuntary switches during `bench/ingest.py --routed`). A webhook
    that arrives meanwhile waits at most for the running thread's turn, milliseconds against
    GitHub's ten seconds. Where the policy does not exist or is refused, nothing changes."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return
    with contextlib.suppress(OSError):
        os.sched_setscheduler(0, policy, os.sched_param(0))


def gunicorn_options(args: argparse.Namespace, port: int) -> dict[str, Any]:
    return {
        "bind": args.bind or f"127.0.0.1:{port}",
        "workers": args.workers,
        "worker_class": "asgi",
        "asgi_lifespan": "on",
        # gunicorn's control socket (a fixed path in $HOME) is not used, and two Apps on one
        # machine would fight over it.
        "control_socket_disable": True,
        "timeout": 60,
        "graceful_timeout": 10,
        "accesslog": "-" if args.access_log else None,
        "loglevel": "info",
        "post_worker_init": answer_polls_on_stop,
    }


def answer_polls_on_stop(worker: Any) -> None:
    """On SIGTERM, answer the spawners' job polls at once, then stop as gunicorn does.

    gunicorn's graceful stop waits up to `graceful_timeout` for requests in flight, and a
    spawner's job poll stays open up to 25 s with nothing to do: stopping the App (or
    `the-loop up`) took the whole 10 s, and the poll was cut off unanswered at the end.
    The App's own shutdown closes its job signal again, later: closing twice is harmless."""
    loop, stop = getattr(worker, "loop", None), getattr(worker, "handle_exit_signal", None)
    state = getattr(getattr(worker, "asgi", None), "state", None)  # the AsgiApp's AppState
    if loop is None or stop is None or state is None:  # not the asgi worker: nothing to follow
        return

    def stopping() -> None:
        state.jobs.close()
        stop()

    loop.add_signal_handler(signal.SIGTERM, stopping)


def run_serve(args: argparse.Namespace) -> int:
    from app.config import load_config, load_settings
    from app.runtime import create_app
    from app.spawner import undumpable

    undumpable()  # inherited by gunicorn's forked workers
    settings = load_settings()
    load_config(settings.the_loop_config)  # every problem of the file, before anything else
    # Fail fast in the parent with a clear message rather than in every gunicorn worker.
    create_app(settings, start_workers=False).extensions["the-loop"].engine.dispose()
    _Gunicorn(gunicorn_options(args, settings.port), wsgi_threads=args.threads).run()
    return 0


def run_worker(args: argparse.Namespace) -> int:
    """Inbox workers (THE_LOOP_INBOX_WORKERS, at least one) and the chat mirror's sender,
    without the HTTP server, at a CPU priority THE_LOOP_WORKER_NICE below the App's (a
    flood is acknowledged first); `--drain` handles what is due and exits."""
    from app.config import load_settings
    from app.github import InboxWorker
    from app.runtime import build_state
    from app.spawner import undumpable

    undumpable()
    settings = load_settings()
    os.nice(settings.the_loop_worker_nice)  # acknowledging comes before handling
    workers = max(1, settings.the_loop_inbox_workers)
    state = build_state(settings, inbox_workers=workers)
    if args.drain:
        worker = InboxWorker(state.services, state.sessions, state.router)
        print(f"handled {worker.drain()} deliveries")
        return 0
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    state.start_workers(workers)
    print(worker_start_line(settings, workers), flush=True)
    stop.wait()
    state.stop_workers()
    print(f"the-loop worker: pid {os.getpid()} stopped", flush=True)
    return 0


def worker_start_line(settings: Any, workers: int) -> str:
    """What `the-loop worker` says when it starts: who it is (host, pid) and the settings
    that decide what it takes on — the store (without its password), how many inbox
    workers, its lease, its retries and its CPU priority."""
    import socket

    from sqlalchemy.engine import make_url

    store = make_url(settings.database_url).render_as_string(hide_password=True)
    return (
        f"the-loop worker: pid {os.getpid()} on {socket.gethostname()}, {workers} inbox "
        f"worker{'s' if workers != 1 else ''} on {store}; a claim is held "
        f"{settings.the_loop_inbox_lease_seconds:g} s, a failing delivery tried "
        f"{settings.the_loop_inbox_attempts} times, nice +{settings.the_loop_worker_nice}"
    )


def _ensure_secret(env_file: Path, variable: str, make: Callable[[], str]) -> str | None:
    """Write a new random value for `variable` into `.env` unless one is configured (there or
    in the environment); returns the new value, or None."""
    from app.config import load_settings
    from app.github import merge_env_file

    if getattr(load_settings(dotenv=env_file), variable.lower()):
        return None
    value = make()
    merge_env_file(env_file, {variable: value})
    return value


def ensure_webhook_secret(env_file: Path) -> str | None:
    """First run of `up`: give the App a random webhook secret in `.env` so it can start.

    `the-loop setup` later replaces it with the one GitHub registered. Returns the new secret,
    or None when one was already configured.
    """
    return _ensure_secret(env_file, "GITHUB_WEBHOOK_SECRET", lambda: secrets.token_hex(32))


def ensure_admin_token(env_file: Path) -> str | None:
    """First run of `up`: the operator credential for the status page, in `.env`. Returns the
    new token (shown once, as a sign-in URL), or None when one was already configured."""
    return _ensure_secret(env_file, "THE_LOOP_ADMIN_TOKEN", lambda: secrets.token_urlsafe(32))


def sandbox_line(settings: Any) -> tuple[str, bool]:
    """What `up` says about how sessions are confined, and whether it may go on."""
    from app.commands.spawner import sandbox_problem
    from app.config import SandboxMode, load_config

    config = load_config(settings.the_loop_config)
    sandbox = config.routing.sandbox
    problem = sandbox_problem(config, dict(os.environ))
    if problem:
        return f"the-loop up: {problem}", False
    if sandbox.resolved is SandboxMode.NONE:
        return (
            "the-loop: WARNING: routing.sandbox.mode is none in "
            f"{config.source}: sessions run unconfined and can read this machine's secrets",
            True,
        )
    return (
        "the-loop: sessions run in a bubblewrap sandbox (routing.sandbox.mode: "
        f"bubblewrap{'' if sandbox.mode == 'bubblewrap' else f', from {sandbox.mode!r}'}; "
        "`none` turns it off)",
        True,
    )


def first_run_lines(settings: Any, env: Mapping[str, str] | None = None) -> list[str]:
    """What is still missing for a first work item, with its fix: the GitHub App's
    registration (the steps the status page shows), and a model credential for the local
    spawner's gateway (`env`: the environment the spawner will start with)."""
    from app.config import ConfigError, load_config
    from app.gateway import openai_upstream_for, upstream_for
    from app.github import GitHubApp, first_run_steps

    config = load_config(settings.the_loop_config)
    lines: list[str] = []
    if not GitHubApp(settings).configured:
        trigger = config.routing.trigger
        steps = first_run_steps(settings.the_loop_url, trigger.label, trigger.execute_keyword)
        lines += [
            "the-loop: no GitHub App is configured yet. Next:",
            *(f"  {n}. {step}" for n, step in enumerate(steps, start=1)),
        ]
    if env is not None:
        try:
            keyed = (
                upstream_for(config, env).has_credential
                or openai_upstream_for(config, env).has_credential
            )
        except ConfigError as exc:  # a key file it cannot use: the spawner says so at start
            return [*lines, f"the-loop: {exc}"]
        if not keyed and not config.routing.sandbox.share_login:
            lines.append(
                "the-loop: the spawner has no model credential, so sessions cannot reach a "
                "model. Fix: export ANTHROPIC_API_KEY (Claude Code) or OPENAI_API_KEY (Codex) "
                "before `the-loop up`, or name a key file in routing.sandbox.apiKeyFile."
            )
    return lines


def run_up(args: argparse.Namespace) -> int:
    """The App and its worker in one gunicorn worker, plus a local spawner process."""
    from app.commands import local_spawner
    from app.config import load_config, load_settings

    # A config that does not load stops `up` before anything is written, served or spawned.
    load_config(load_settings().the_loop_config)
    if ensure_webhook_secret(Path(".env")):
        print(
            "the-loop: wrote a new GITHUB_WEBHOOK_SECRET to .env (run `the-loop setup` "
            "to register the GitHub App with it)"
        )
    admin_token = ensure_admin_token(Path(".env"))
    args.workers = 1
    settings = load_settings()
    if not args.no_spawner:
        line, go_on = sandbox_line(settings)
        print(line, file=sys.stdout if go_on else sys.stderr, flush=True)
        if not go_on:
            return 2
    url = f"http://127.0.0.1:{settings.port}"
    print(f"the-loop: App on {url} (database {settings.database_url})")
    if admin_token:
        print(
            f"the-loop: wrote a new THE_LOOP_ADMIN_TOKEN to .env; sign in to the status page "
            f"once at {url}/?token={admin_token} (shown only now)"
        )
    for line in first_run_lines(settings, None if args.no_spawner else os.environ):
        print(line)
    child = local_spawner.start(args, settings)
    try:
        return run_serve(args)
    finally:
        local_spawner.stop(child)


def _add_server_args(parser: argparse.ArgumentParser, workers: int) -> None:
    parser.add_argument("--bind", help="host:port (default 127.0.0.1:$PORT)")
    parser.add_argument("--workers", type=int, default=workers, help="gunicorn worker processes")
    parser.add_argument(
        "--threads",
        type=int,
        default=32,
        help="threads per worker for the Flask routes (Slack, spawner API, status)",
    )
    parser.add_argument("--access-log", action="store_true", help="log every request")


def register(subparsers: Any) -> None:
    serve = subparsers.add_parser("serve", help="run the App (webhooks, Slack, spawner API)")
    _add_server_args(serve, workers=2)
    serve.set_defaults(func=run_serve)

    up = subparsers.add_parser("up", help="run everything on this machine (SQLite, local spawner)")
    _add_server_args(up, workers=1)
    up.add_argument("--no-spawner", action="store_true", help="do not start a local spawner")
    up.set_defaults(func=run_up)

    worker = subparsers.add_parser("worker", help="run an inbox worker without the HTTP server")
    worker.add_argument("--drain", action="store_true", help="handle what is due, then exit")
    worker.set_defaults(func=run_worker)


logging.getLogger("gunicorn.error").propagate = True
