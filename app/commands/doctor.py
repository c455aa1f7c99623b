"""`the-loop doctor`: is this devbox ready to host sessions? One line per check, each
failure with its fix; exit 1 on any failure.

This module only gathers facts (versions, files under `$HOME`, two HTTP calls to the App,
the verdict cache) and prints; the verdicts are `app.spawner.devbox_checks`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports every command module: keep this one cheap to import
    from app.spawner import Check, Exposure, HttpOutcome, JsonFile, Tool

TIMEOUT = 10.0
SANDBOX_ARGV = ("--ro-bind", "/", "/", "--dev", "/dev", "--unshare-all", "--die-with-parent")
TOOLS = (("tmux", "-V"), ("git", "--version"))


def _run(argv: list[str], env: Mapping[str, str]) -> tuple[int | None, str]:
    try:
        done = subprocess.run(
            argv, env=dict(env), capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        return None, "timed out"
    except OSError as exc:
        return None, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def find_tool(name: str, executable: str, flag: str, env: Mapping[str, str]) -> Tool:
    from app.spawner import Tool

    path = shutil.which(executable, path=env.get("PATH"))
    if path is None:
        return Tool(name, None)
    code, output = _run([path, flag], env)
    first = output.splitlines()[0].strip() if output else ""
    if code != 0 or not first:
        return Tool(name, path, None, first or f"`{flag}` failed")
    return Tool(name, path, first)


def try_sandbox(bwrap: Tool, env: Mapping[str, str], *extra: str) -> tuple[bool | None, str]:
    if bwrap.path is None:
        return None, ""
    code, output = _run([bwrap.path, *SANDBOX_ARGV, *extra, "/bin/sh", "-c", "exit 0"], env)
    return code == 0, output.splitlines()[-1] if output else f"exit {code}"


def http_get(url: str, token: str | None = None) -> HttpOutcome:
    import httpx

    from app.spawner import HttpOutcome

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, headers=headers, timeout=TIMEOUT)
    except httpx.HTTPError as exc:
        return HttpOutcome(error=f"{exc.__class__.__name__}: {exc}")
    try:
        data = response.json()
    except ValueError:
        data = {}
    return HttpOutcome(response.status_code, data if isinstance(data, dict) else {})


def read_text(path: Path) -> JsonFile:
    from app.spawner import JsonFile

    try:
        return JsonFile(str(path), path.read_text())
    except FileNotFoundError:
        return JsonFile(str(path), None)
    except OSError as exc:
        return JsonFile(str(path), f"<unreadable: {exc.strerror}>")


def _config(settings: Any) -> tuple[Any, Check]:
    from app.config import ConfigError, OperatorConfig, load_config
    from app.spawner import Check, Level

    try:
        config = load_config(settings.the_loop_config)
    except ConfigError as exc:
        fix = "correct the key named (`the-loop config check` shows the rest)"
        return OperatorConfig(), Check("operator config", Level.FAIL, str(exc), fix)
    if not settings.the_loop_config.expanduser().exists():
        detail = f"{config.source} does not exist: the defaults apply"
        return config, Check("operator config", Level.WARN, detail, "set THE_LOOP_CONFIG")
    ignored = f"; {len(config.ignored)} key(s) ignored" if config.ignored else ""
    detail = f"{config.source}: {len(config.harnesses)} harness(es), {len(config.models)} model(s)"
    return config, Check("operator config", Level.OK, detail + ignored)


def harness_exposure(
    config: Any, settings: Any, executable: str, env: Mapping[str, str]
) -> Exposure | None:
    """What a session's sandbox would show of `executable` on this devbox (None when
    sessions run unconfined): the plan every session shares, without its own checkout and
    home, and this devbox's secrets."""
    from app.config import SandboxMode
    from app.spawner import harness_exposure, secrets, shared_plan, spawner_state_dir

    sandbox = config.routing.sandbox
    if sandbox.resolved is SandboxMode.NONE:
        return None
    state_dir = spawner_state_dir(settings)
    hidden = secrets(
        state_dir=state_dir,
        real_home=Path(env.get("HOME") or Path.home()),
        workspace_root=config.routing.workspace.resolved_root,
        socket_dir=state_dir,
        env=env,
    )
    plan = shared_plan(sandbox=sandbox, env=env, hidden=hidden)
    return harness_exposure(plan, executable, env)


def model_credential(config: Any, env: Mapping[str, str], login: Any) -> Check:
    """The credential the spawner's model gateway would answer sessions with."""
    from app.config import ConfigError
    from app.gateway import upstream_for
    from app.spawner import devbox_checks as dc

    share = config.routing.sandbox.share_login
    try:
        upstream = upstream_for(config, env)
    except ConfigError as exc:
        return dc.check_credential(None, str(exc), login, share)
    source = {"env": "ANTHROPIC_API_KEY", "env-bearer": "ANTHROPIC_AUTH_TOKEN"}.get(
        upstream.source, upstream.source
    )
    return dc.check_credential(source if upstream.has_credential else None, None, login, share)


def openai_credential(config: Any, env: Mapping[str, str]) -> Check:
    """The credential the model gateway would answer Codex sessions with."""
    from app.config import ConfigError
    from app.gateway import openai_upstream_for
    from app.spawner import devbox_checks as dc

    try:
        upstream = openai_upstream_for(config, env)
    except ConfigError as exc:
        return dc.check_openai_credential(None, str(exc))
    source = {"env-openai": "OPENAI_API_KEY"}.get(upstream.source, upstream.source)
    return dc.check_openai_credential(source if upstream.has_credential else None, None)


def session_limits(config: Any, settings: Any) -> Check:
    """The limits each session would get here (the host probed; nothing is made)."""
    from app.config import SandboxMode
    from app.spawner import choose_plan, probe, spawner_state_dir, spawner_tag
    from app.spawner import devbox_checks as dc

    sandbox = config.routing.sandbox
    offer = probe(spawner_tag(spawner_state_dir(settings)))
    sandboxed = sandbox.resolved is not SandboxMode.NONE
    return dc.check_limits(choose_plan(offer, sandbox.limits, sandboxed=sandboxed), offer)


def session_user_check(config: Any) -> Check:
    """Who this devbox's sessions run as (the account looked up, never made here)."""
    import pwd

    from app.config import SandboxMode
    from app.spawner import SESSION_USER
    from app.spawner import devbox_checks as dc

    try:
        found = pwd.getpwnam(SESSION_USER)
        account: tuple[str, int] | None = (found.pw_name, found.pw_uid)
    except KeyError:
        account = None
    sandboxed = config.routing.sandbox.resolved is not SandboxMode.NONE
    return dc.check_session_user(os.geteuid(), sandboxed, account, SESSION_USER)


def service_answers(services: list[str]) -> dict[str, str]:
    """Each `routing.sandbox.services` entry → "" when it accepts a connection, else why."""
    import socket

    answers: dict[str, str] = {}
    for service in services:
        try:
            if service.startswith("/"):
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.settimeout(5)
                    sock.connect(service)
            else:
                host, _, port = service.rpartition(":")
                socket.create_connection((host, int(port)), timeout=5).close()
            answers[service] = ""
        except OSError as exc:
            answers[service] = exc.strerror or type(exc).__name__
    return answers


def network_use(sandbox: Any, env: Mapping[str, str]) -> list[Check]:
    """What each egress preset expands to here, and whether each relayed service answers."""
    from app.spawner import check_presets, check_services, read_registries

    checks = check_presets(sandbox, read_registries(env))
    return checks + check_services(service_answers(sandbox.services))


def gather_checks(settings: Any, env: Mapping[str, str]) -> list[Check]:
    """Every check of this devbox, in the order an operator would fix them."""
    from app.config import DEFAULT_HARNESS, HOSTING_ADAPTERS
    from app.spawner import (
        adapter_for,
        cached_results,
        claude_config_path,
        claude_settings_path,
        hostable_harnesses,
        plan_probes,
        verdict_cache,
    )
    from app.spawner import devbox_checks as dc

    config, config_check = _config(settings)
    checks = [config_check]
    claude = adapter_for(config, DEFAULT_HARNESS)
    checks.append(dc.check_tool(find_tool("claude", claude.executable, "--version", env)))
    # Every other declared harness the spawner has an adapter for (codex): its binary.
    others = [h.name for h in config.harnesses if h.name != DEFAULT_HARNESS]
    hosted = [name for name in others if name in HOSTING_ADAPTERS]
    for name in hosted:
        executable = adapter_for(config, name).executable
        checks.append(dc.check_tool(find_tool(name, executable, "--version", env)))
    checks += [dc.check_tool(find_tool(name, name, flag, env)) for name, flag in TOOLS]
    bwrap = find_tool("bwrap", "bwrap", "--version", env)
    checks.append(dc.check_sandbox(bwrap, *try_sandbox(bwrap, env)))
    closed = try_sandbox(bwrap, env, "--unshare-net")
    checks.append(dc.check_network(config.routing.sandbox, *closed))
    checks += network_use(config.routing.sandbox, env)
    checks.append(session_limits(config, settings))
    checks.append(session_user_check(config))
    disk = config.routing.sandbox.limits.disk
    shown = disk.human_readable(decimal=False) if disk is not None else ""
    checks.append(dc.check_disk(int(disk) if disk is not None else None, shown))
    checks.append(dc.check_session_env(env, config.routing.sandbox.env.pass_env))
    for harness in hostable_harnesses(config, env):
        executable = adapter_for(config, harness).executable
        checks.append(
            dc.check_exposure(harness_exposure(config, settings, executable, env), harness)
        )

    url = settings.the_loop_url.rstrip("/")
    health = http_get(f"{url}/healthz")
    checks.append(dc.check_app(url, health))
    token = settings.the_loop_spawner_token
    whoami = http_get(f"{url}/spawner/v1/whoami", token) if token and health.status else None
    checks.append(dc.check_token(bool(token), whoami))

    home = Path(env.get("HOME") or Path.home())
    claude_json = read_text(claude_config_path(home))
    checks.append(dc.check_claude_json(claude_json))
    login = read_text(home / ".claude" / ".credentials.json")
    checks.append(model_credential(config, env, login))
    if "codex" in hosted:
        checks.append(openai_credential(config, env))
    checks.append(
        dc.check_bypass(
            claude.args,
            config.routing.harness_trust,
            read_text(claude_settings_path(home)),
            root=os.geteuid() == 0,
            sandboxed=bool(env.get("IS_SANDBOX")),
        )
    )
    probes = plan_probes(config, hostable_harnesses(config, env))
    checks.append(dc.check_models(cached_results(probes, verdict_cache(settings))))
    return checks


MARKS = {"ok": "[green]✓ ok[/]", "warn": "[yellow]! warn[/]", "fail": "[red]✗ fail[/]"}


def print_checks(checks: list[Check], as_json: bool) -> None:
    if as_json:
        for c in checks:
            print(
                json.dumps(
                    {"check": c.name, "level": c.level.value, "detail": c.detail, "fix": c.fix}
                )
            )
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table("check", "", "detail", "fix", box=None, pad_edge=False)
    for c in checks:
        table.add_row(Text(c.name), MARKS[c.level.value], Text(c.detail), Text(c.fix))
    console = Console()
    console.print(table)
    failures = sum(c.level.value == "fail" for c in checks)
    console.print(f"{failures} check(s) failed" if failures else "this devbox is ready")


def run_doctor(args: argparse.Namespace) -> int:
    from app.config import load_settings
    from app.spawner import failed

    settings = load_settings()
    checks = gather_checks(settings, os.environ)
    print_checks(checks, args.json)
    if not args.json:
        print_in_force(settings)
    return 1 if failed(checks) else 0


def print_in_force(settings: Any) -> None:
    """What the operator config puts in force here for money, reach and isolation (the
    table `config check` prints); nothing when the config does not load (its check says why)."""
    from rich.console import Console

    from app.commands.configcheck import in_force_table
    from app.spawner import Level

    config, check = _config(settings)
    if check.level is not Level.FAIL:
        console = Console()
        console.print()
        console.print(in_force_table(config))


def register(subparsers: Any) -> None:
    doctor = subparsers.add_parser("doctor", help="check that this devbox can host sessions")
    doctor.add_argument("--json", action="store_true", help="one JSON object per check")
    doctor.set_defaults(func=run_doctor)
