"""Is this devbox ready to host sessions? The checks of `the-loop doctor`, as pure functions:
facts in (gathered by `app.commands.doctor`), one verdict per check out, each failure with
the fix an operator can apply.

A devbox that is half set up (no API key approved, no sandbox, a token for the wrong
repository, a bypass flag nobody pre-accepted) is otherwise found out one failed launch at a
time, by a session sitting at a screen nobody watches.
"""

from __future__ import annotations

import ipaddress
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from app.config import HarnessTrust, NetworkMode, Sandbox, SandboxMode
from app.spawner.confine.installs import Exposure
from app.spawner.confine.limits import HostOffer, LimitPlan, Mechanism, describe_plan, wanted
from app.spawner.confine.sessionenv import described, refused_names
from app.spawner.harness.claude_trust import (
    BYPASS_FLAG,
    BYPASS_SETTING,
    has_bypass_flag,
    should_accept_bypass,
)
from app.spawner.probes import Result, Verdict


class Level(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    name: str
    level: Level
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Tool:
    """An executable as found on PATH: where, and the first line of its `--version`."""

    name: str
    path: str | None
    version: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class HttpOutcome:
    """One HTTP call's outcome: a status and JSON body, or the error that prevented it."""

    status: int | None = None
    data: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class JsonFile:
    """A file's text (None when absent) and where it lives, for the messages."""

    path: str
    text: str | None


def _load(file: JsonFile) -> tuple[dict[str, Any] | None, str | None]:
    """(object, None), (None, None) when absent, or (None, why it cannot be read)."""
    if file.text is None:
        return None, None
    if not file.text.strip():
        return {}, None
    try:
        data = json.loads(file.text)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg}, line {exc.lineno})"
    return (data, None) if isinstance(data, dict) else (None, "does not hold a JSON object")


INSTALL_HINTS = {
    "claude": "npm install -g @anthropic-ai/claude-code",
    "codex": "npm install -g @openai/codex",
    "tmux": "apt-get install tmux",
    "git": "apt-get install git",
    "bwrap": "apt-get install bubblewrap",
}


def check_tool(tool: Tool) -> Check:
    if tool.path is None:
        hint = INSTALL_HINTS.get(tool.name, f"install {tool.name}")
        return Check(tool.name, Level.FAIL, "not found on PATH", f"{hint}, then check PATH")
    if tool.version is None:
        why = tool.error or "printed no version"
        return Check(tool.name, Level.FAIL, f"{tool.path}: {why}", f"reinstall {tool.name}")
    return Check(tool.name, Level.OK, f"{tool.version} ({tool.path})")


def check_sandbox(tool: Tool, works: bool | None, error: str = "") -> Check:
    """bubblewrap present, and able to make a namespace as this user."""
    found = check_tool(tool)
    name = "sandbox (bwrap)"
    if found.level is not Level.OK:
        return Check(name, found.level, found.detail, found.fix)
    if not works:
        fix = "let bwrap create namespaces as this user (kernel.unprivileged_userns_clone=1)"
        return Check(name, Level.FAIL, f"{tool.version}, but a sandbox fails: {error}", fix)
    return Check(name, Level.OK, f"{tool.version}: a sandbox starts")


def check_network(sandbox: Sandbox, works: bool | None, error: str = "") -> Check:
    """The sessions' network (`routing.sandbox.network`): closed, and able to be, or shared."""
    name = "network"
    if sandbox.resolved is SandboxMode.NONE:
        return Check(name, Level.WARN, "shared: sessions run unconfined (mode: none)")
    if sandbox.network is NetworkMode.HOST:
        fix = "set routing.sandbox.network: gateways (and list what sessions need in egress)"
        detail = "host: sessions share the devbox's network and can reach any host"
        return Check(name, Level.WARN, detail, fix)
    listed = ", ".join(sandbox.egress) or "none"
    if works is False:
        fix = "let bwrap create a network namespace, or set routing.sandbox.network: host"
        return Check(name, Level.FAIL, f"gateways, but --unshare-net fails: {error}", fix)
    return Check(name, Level.OK, f"gateways: the App, the model gateway; egress: {listed}")


def check_limits(plan: LimitPlan, offer: HostOffer) -> Check:
    """Each session's bounds (`routing.sandbox.limits`): the mechanism in force and what it
    enforces; a limit asked for and not enforced is a warning."""
    name, detail = "session limits", describe_plan(plan)
    if not wanted(plan.limits):
        return Check(name, Level.WARN, detail, "set routing.sandbox.limits.memory / .processes")
    if plan.mechanism is Mechanism.NONE or plan.weak:
        fix = "give the spawner a writable cgroup (v2 delegated, or v1 memory and pids)"
        return Check(name, Level.WARN, f"{detail}; {offer.why}".rstrip("; "), fix)
    return Check(name, Level.OK, detail)


def check_exposure(exposure: Exposure | None, harness: str) -> Check:
    """What the sandbox shows of a harness installed here: its installation, read-only, when
    it is not among what every session sees already (`None`: sessions are unconfined)."""
    name = f"sandbox shows {harness}"
    if exposure is None:
        return Check(name, Level.OK, "not confined (routing.sandbox.mode: none)")
    located = exposure.located
    if located.found is None or located.executable is None:
        return Check(name, Level.FAIL, f"{harness} is not on PATH", f"install {harness}")
    via = f" (via {located.interpreter})" if located.interpreter else ""
    where = f"{located.found}" + (
        f" -> {located.executable}" if located.executable != located.found else ""
    )
    if exposure.hidden:
        hidden = ", ".join(map(str, exposure.hidden))
        fix = f"install {harness} outside the spawner's and the App's private directories"
        return Check(name, Level.FAIL, f"{where}{via}: {hidden} cannot be shown", fix)
    if not exposure.added:
        return Check(name, Level.OK, f"{where}{via}: among what every session sees")
    added = ", ".join(map(str, exposure.added))
    return Check(name, Level.OK, f"{where}{via}: shows {added} read-only")


def _remote_http(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    if parts.hostname == "localhost":
        return False
    try:
        return not ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        return True


def check_app(url: str, health: HttpOutcome) -> Check:
    name = "App reachable"
    if health.status != 200 or health.data.get("ok") is not True:
        why = health.error or f"GET /healthz answered {health.status}"
        fix = "start the App (`the-loop serve` / `the-loop up`) or correct THE_LOOP_URL"
        return Check(name, Level.FAIL, f"{url}: {why}", fix)
    detail = f"{url}: the-loop {health.data.get('version', '?')}"
    if _remote_http(url):
        fix = "use https:// for an App on another host"
        return Check(name, Level.WARN, f"{detail}; plain http to a remote host", fix)
    return Check(name, Level.OK, detail)


def _scope(repositories: Any) -> str:
    names = [str(r) for r in repositories or []]
    if "*" in names:
        return "every repository the App is installed on"
    return ", ".join(names) if names else "no repository"


def check_token(token_set: bool, whoami: HttpOutcome | None) -> Check:
    name = "spawner token"
    create = "create one on the App host: the-loop spawner token create --name NAME --repo O/R"
    if not token_set:
        return Check(name, Level.FAIL, "THE_LOOP_SPAWNER_TOKEN is not set", create)
    if whoami is None or (whoami.error is not None and whoami.status is None):
        return Check(name, Level.WARN, "not checked: the App is unreachable")
    if whoami.status in (401, 403):
        return Check(name, Level.FAIL, "the App refused the token (revoked or mistyped)", create)
    if whoami.status != 200:
        why = whoami.error or f"answered {whoami.status}"
        return Check(name, Level.FAIL, f"GET /spawner/v1/whoami {why}", "update the App")
    data = whoami.data
    who = f"spawner {data.get('name')!s}"
    serves = data.get("serves")
    if serves is None:
        detail = f"{who}; not registered yet; the token allows {_scope(data.get('allowed'))}"
        return Check(name, Level.OK, detail)
    if not serves:
        fix = "start the spawner with --repo names the token allows, or mint a wider token"
        return Check(name, Level.FAIL, f"{who} serves no repository", fix)
    return Check(name, Level.OK, f"{who}; serves {_scope(serves)}")


def check_claude_json(file: JsonFile) -> Check:
    name = "~/.claude.json"
    data, problem = _load(file)
    if problem is not None:
        fix = f"repair or move aside {file.path} (the spawner merges into it, never replaces it)"
        return Check(name, Level.FAIL, f"{file.path}: {problem}", fix)
    if data is None:
        fix = "run `claude` once interactively on this devbox"
        return Check(name, Level.WARN, f"{file.path} does not exist yet", fix)
    projects = data.get("projects")
    count = len(projects) if isinstance(projects, dict) else 0
    if data.get("hasCompletedOnboarding") is not True:
        fix = "run `claude` once interactively to finish its first-run setup"
        return Check(name, Level.WARN, "parseable; first-run onboarding not done", fix)
    return Check(name, Level.OK, f"parseable; {count} project(s) known")


def check_credential(
    source: str | None, problem: str | None, login: JsonFile, share_login: bool
) -> Check:
    """What the model gateway answers sessions with (`source`: where its key comes from, or
    `problem`: why the configured one cannot be used), or a login shared with sessions."""
    name = "Claude credential"
    if problem is not None:
        return Check(name, Level.FAIL, problem, "fix routing.sandbox.apiKeyFile")
    if source is not None:
        return Check(name, Level.OK, f"the model gateway answers sessions with {source}")
    data, why = _load(login)
    if data and share_login:
        return Check(name, Level.OK, f"logged in ({login.path}); shared with sessions")
    if data:
        detail = f"logged in ({login.path}), but a login reaches sessions only when shared"
        fix = (
            "set ANTHROPIC_API_KEY (or routing.sandbox.apiKeyFile) for the model gateway, or "
            "routing.sandbox.shareLogin: true (the README says the risk)"
        )
        return Check(name, Level.FAIL, detail, fix)
    detail = f"{login.path}: {why}" if why else "no ANTHROPIC_API_KEY, no key file and no login"
    fix = "set ANTHROPIC_API_KEY (or routing.sandbox.apiKeyFile), or run `claude /login`"
    return Check(name, Level.FAIL, detail, fix + " and set routing.sandbox.shareLogin: true")


def check_openai_credential(source: str | None, problem: str | None) -> Check:
    """What the model gateway answers Codex sessions with (`source`), or why it cannot."""
    name = "OpenAI credential (codex)"
    if problem is not None:
        return Check(name, Level.FAIL, problem, "fix routing.sandbox.openaiKeyFile")
    if source is not None:
        return Check(name, Level.OK, f"the model gateway answers Codex sessions with {source}")
    fix = "set OPENAI_API_KEY (or routing.sandbox.openaiKeyFile) for the spawner"
    return Check(name, Level.FAIL, "no OPENAI_API_KEY and no key file", fix)


def check_bypass(
    launch_args: Sequence[str],
    trust: HarnessTrust,
    settings: JsonFile,
    *,
    root: bool,
    sandboxed: bool,
) -> Check:
    """When the resolved args carry the bypass flag: is its disclaimer pre-accepted, and can
    the flag run at all (Claude Code refuses it as root outside a sandbox)?"""
    name = "bypass disclaimer"
    if not has_bypass_flag(launch_args):
        return Check(name, Level.OK, f"not needed: the args carry no {BYPASS_FLAG}")
    if root and not sandboxed:
        fix = "run the spawner as a normal user (or inside a sandbox that sets IS_SANDBOX=1)"
        return Check(name, Level.FAIL, f"claude refuses {BYPASS_FLAG} as root", fix)
    data, problem = _load(settings)
    if data and data.get(BYPASS_SETTING) is True:
        return Check(name, Level.OK, f"pre-accepted in {settings.path}")
    if should_accept_bypass(trust, launch_args):
        if problem is not None:
            fix = f"repair {settings.path}: harnessTrust writes {BYPASS_SETTING} into it"
            return Check(name, Level.FAIL, f"{settings.path}: {problem}", fix)
        detail = "harnessTrust (acceptBypassPermissions: auto) pre-accepts it at each spawn"
        return Check(name, Level.OK, detail)
    fix = (
        "set routing.harnessTrust {enabled: true, acceptBypassPermissions: auto}, or "
        f"{BYPASS_SETTING}: true in {settings.path}"
    )
    return Check(name, Level.FAIL, "not pre-accepted: sessions stop at the disclaimer", fix)


def check_models(results: Sequence[Result | None]) -> Check:
    """A summary of the `models check` verdict cache for this devbox's probes."""
    name = "models check"
    if not results:
        return Check(name, Level.OK, "no models or effort levels declared")
    tally = Counter(r.verdict.value if r is not None else "not probed" for r in results)
    order = (Verdict.OK.value, Verdict.REFUSED.value, Verdict.UNKNOWN.value, "not probed")
    detail = ", ".join(f"{tally[k]} {k}" for k in order if tally[k])
    if tally[Verdict.REFUSED.value]:
        refused = sorted({r.probe.token for r in results if r and r.verdict is Verdict.REFUSED})
        fix = "fix or remove the refused choices (`the-loop models list` shows why)"
        return Check(name, Level.FAIL, f"{detail}: refused {', '.join(refused)}", fix)
    if tally[Verdict.UNKNOWN.value] or tally["not probed"]:
        return Check(name, Level.WARN, detail, "run `the-loop models check`")
    return Check(name, Level.OK, detail)


def failed(checks: Sequence[Check]) -> bool:
    return any(c.level is Level.FAIL for c in checks)


def check_session_env(spawner_env: Mapping[str, str], pass_env: Sequence[str]) -> Check:
    """What a session's environment will hold (`sessionenv`): every name, the value of each
    harness variable (none secret); a `passEnv` name that is never passed, or that the
    spawner's environment does not set, is a warning."""
    name = "session environment"
    shown = described(spawner_env, pass_env)
    detail = ", ".join(s.name if s.value is None else f"{s.name}={s.value}" for s in shown)
    refused = refused_names(pass_env)
    unset = sorted(n for n in set(pass_env) - set(refused) if n not in spawner_env)
    problems = []
    if refused:
        problems.append(f"never passed (a credential): {', '.join(refused)}")
    if unset:
        problems.append(f"not set in the spawner's environment: {', '.join(unset)}")
    if problems:
        fix = "edit routing.sandbox.env.passEnv"
        return Check(name, Level.WARN, f"{detail}; {'; '.join(problems)}", fix)
    return Check(name, Level.OK, detail)


def check_session_user(
    spawner_uid: int, sandboxed: bool, account: tuple[str, int] | None, name: str
) -> Check:
    """Who sessions run as (`sessionuser`): the spawner's own user when it is not root; as
    root, the unprivileged `name` account (`account`: its name and uid, None while it is not
    made yet: the first launch makes it). A root spawner with `routing.sandbox.mode: none`
    would run sessions as root: it refuses to, so that is a failure."""
    check = "session user"
    if spawner_uid != 0:
        return Check(check, Level.OK, f"the spawner's own (uid {spawner_uid}), never root")
    if not sandboxed:
        fix = "run the spawner as another user, or set routing.sandbox.mode: bubblewrap"
        said = "none: a root spawner refuses unsandboxed sessions (they would run as root)"
        return Check(check, Level.FAIL, said, fix)
    if account is None:
        return Check(check, Level.OK, f"{name}, made on the first launch (useradd --system)")
    return Check(
        check, Level.OK, f"{account[0]} (uid {account[1]}): it owns each checkout and home"
    )


def check_disk(limit: int | None, human: str) -> Check:
    """Each session's disk bound (`routing.sandbox.limits.disk`, `human` its text): its
    checkout and home watched from the host, its `/tmp` a tmpfs no larger; none is a
    warning (a session could fill the disk the App's database shares)."""
    if limit is None:
        fix = "set routing.sandbox.limits.disk (e.g. 20GiB)"
        return Check("session disk", Level.WARN, "no bound: a session may fill the disk", fix)
    detail = f"{human} per session: checkout and home measured every few seconds, /tmp a tmpfs"
    return Check("session disk", Level.OK, detail)
