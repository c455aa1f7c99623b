"""A Claude Code session's own home: only what Claude Code needs, written before each launch.

The home (`confine/sessionhome.home_for`) persists across relaunches (Claude Code keeps the
conversations `--resume` needs there) and is the only home the session sees. It holds no
credential of the operator's. Before each launch it receives:

- in `~/.claude.json`, merged into the session's own copy (Claude Code writes to it as it
  runs): onboarding done and the session's own gateway pass approved, and nothing else of
  the operator's: no `primaryApiKey`, no other approved key, no account; the trust entries
  for the checkout are added by `claude_trust.pretrust`;
- `~/.claude/settings.json` holding only the operator's settings named in
  `INHERITED_SETTINGS` (the model, display and transcript preferences, permission rules):
  an allow-list, so `env` (where tokens and custom headers live), every helper that runs a
  command for a credential (`apiKeyHelper`, `awsCredentialExport`, `awsAuthRefresh`,
  `otelHeadersHelper`, …), hooks, status lines and any setting Claude Code adds later stay
  out. The stop gate's hook lives in the managed settings (`managed_settings`), shown
  read-only at `/etc/claude-code`, which Claude Code reads above every user or project
  setting and which the session cannot change (a `disableAllHooks` it writes does not
  switch managed hooks off);
- the operator's login (`~/.claude/.credentials.json`) only with `routing.sandbox.shareLogin:
  true`; otherwise a copy left from an earlier launch is removed;
- git's `user.name` / `user.email` (`gitidentity.write_git_identity`, every harness's).

The merges are pure; every file edit holds the same lock as every other edit of it. A real
file that cannot be read is reported and nothing is taken from it. The session writes its
home, so every write here goes through `app.files`' `…_within` functions: a link it planted
(`~/.claude`, `~/.claude.json`, `.credentials.json` pointing at a host file) is replaced,
never written through, and never read. Claude Code's transcript lies in the home too
(`transcript_path`: found without following a link).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from app.files import FileLock, remove_within, write_json, write_within
from app.gateway import is_pass_tail
from app.spawner.harness.claude_trust import (
    TrustFileError,
    claude_config_path,
    claude_settings_path,
    parse_object,
    update_json_file,
)
from app.spawner.workspace.gitidentity import write_git_identity
from hooks.gate_entry import install_stop_hook, managed_command

MANAGED = "managed"  # under the state directory: shown as /etc/claude-code inside
MANAGED_FILE = "managed-settings.json"
LOADER_VARIABLES = ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH")  # emptied for every hook
# Claude Code's switches that would run no hook (its bare mode), held off in managed `env`.
PINNED_ENV = {"CLAUDE_CODE_SIMPLE": "0"}
# Managed keys that keep the managed hooks running and no hook of the session's own.
PINNED_SETTINGS = {"disableAllHooks": False, "allowManagedHooksOnly": True}
HOST_MANAGED = Path("/etc/claude-code") / MANAGED_FILE
CREDENTIALS = ".credentials.json"
APPROVALS = "customApiKeyResponses"
_SESSION_ID_RE = re.compile(r"[A-Za-z0-9-]{1,64}")
KEPT_PASS_APPROVALS = 64  # in the operator's own config, for unconfined sessions
ACCOUNT = "oauthAccount"
# Keys of `~/.claude.json` that hold or name the operator's credentials.
OPERATOR_KEYS = frozenset({"primaryApiKey", APPROVALS, ACCOUNT})
# The operator's settings a session inherits: preferences that neither hold nor fetch a
# credential, run no command and lead nowhere around the gateway. Anything else (`env`,
# `*Helper`, `aws*`, hooks, `statusLine`, plugins, MCP servers, a key added later) stays out.
INHERITED_SETTINGS = frozenset(
    {
        "$schema",
        "model",
        "alwaysThinkingEnabled",
        "outputStyle",
        "language",
        "includeCoAuthoredBy",
        "attribution",
        "cleanupPeriodDays",
        "autoCompactEnabled",
        "spinnerTipsEnabled",
        "respectGitignore",
        "theme",
        "permissions",
    }
)
# Of `permissions`: the rules and mode; nothing in them names a credential.
INHERITED_PERMISSIONS = frozenset(
    {"allow", "ask", "deny", "defaultMode", "additionalDirectories", "disableBypassPermissionsMode"}
)


def session_config(
    data: dict[str, Any], api_key: str | None, account: Any = None
) -> dict[str, Any] | None:
    """The session's `~/.claude.json`: onboarding done, only `api_key` approved (by its last
    20 characters, as Claude Code records it), no credential of the operator's and an
    account only when a login is shared; None when it already is so (pure)."""
    updated = {key: value for key, value in data.items() if key not in OPERATOR_KEYS}
    updated["hasCompletedOnboarding"] = True
    if api_key:
        updated[APPROVALS] = {"approved": [api_key[-20:]], "rejected": []}
    if account is not None:
        updated[ACCOUNT] = account
    return None if updated == data else updated


def _listed(data: dict[str, Any], key: str) -> list[Any]:
    value = data.get(key)
    return value if isinstance(value, list) else []


def with_approved_key(data: dict[str, Any], api_key: str) -> dict[str, Any] | None:
    """`data` with `api_key` approved beside the keys it already approves (the operator's own
    config, for a session without a home of its own), keeping only the latest passes'
    approvals (sessions launched together each need theirs until they start), or None when
    it already is so (pure)."""
    found = data.get(APPROVALS)
    responses: dict[str, Any] = found if isinstance(found, dict) else {}
    listed = _listed(responses, "approved")
    tail = api_key[-20:]
    if tail in listed:
        return None
    passes = [t for t in listed if is_pass_tail(t)][-(KEPT_PASS_APPROVALS - 1) :]
    approved = [t for t in listed if not is_pass_tail(t) or t in passes]
    rejected = _listed(responses, "rejected")
    kept = {**responses, "approved": [*approved, tail], "rejected": rejected}
    return {**data, "hasCompletedOnboarding": True, APPROVALS: kept}


def session_settings(real: dict[str, Any]) -> dict[str, Any]:
    """Of the operator's settings, only `INHERITED_SETTINGS` (and of `permissions`, only
    `INHERITED_PERMISSIONS`) (pure). No hook comes along: the managed settings run the
    stop gate."""
    kept = {key: value for key, value in real.items() if key in INHERITED_SETTINGS}
    permissions = kept.get("permissions")
    if isinstance(permissions, dict):
        kept["permissions"] = {k: v for k, v in permissions.items() if k in INHERITED_PERMISSIONS}
    elif "permissions" in kept:
        del kept["permissions"]
    return kept


def managed_settings(host: dict[str, Any], gate_command: str) -> dict[str, Any]:
    """The host's own managed settings (if any) with exactly one stop-gate hook (pure).

    Their `env` empties the dynamic loader's variables (`LOADER_VARIABLES`): Claude Code
    hands the `env` of every settings file to its hooks, managed ones last, and a preloaded
    library the session built would run inside the gate before any line of it. It also pins
    what would switch hooks off (`PINNED_ENV`: a checkout's or home's settings `env` setting
    `CLAUDE_CODE_SIMPLE` would start the next launch in the bare mode, which runs no hook;
    managed values are applied last, so they win). `disableAllHooks: false` and
    `allowManagedHooksOnly: true` keep the managed hooks, and only them, running whatever
    a user or project settings file says (the session writes both)."""
    settings, _ = install_stop_hook(host, gate_command)
    found = settings.get("env")
    env: dict[str, Any] = found if isinstance(found, dict) else {}
    pinned = {**env, **dict.fromkeys(LOADER_VARIABLES, ""), **PINNED_ENV}
    return {**settings, **PINNED_SETTINGS, "env": pinned}


def write_managed(state_dir: Path, host_file: Path = HOST_MANAGED) -> Path:
    """The managed-settings directory every sandboxed session sees as `/etc/claude-code`
    (the spawner's, in its state directory: no session can write it); raises ValueError
    or OSError when the host's own managed settings cannot be read."""
    directory = state_dir / MANAGED
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    try:
        host = parse_object(host_file.read_text(), str(host_file))
    except FileNotFoundError:
        host = {}
    wanted = managed_settings(host, managed_command())
    write_json(directory / MANAGED_FILE, wanted, 0o644)
    return directory


def _config_sources(real_home: Path, env: Mapping[str, str]) -> tuple[Path, Path]:
    """(config file, config directory) of the operator's Claude Code."""
    custom = env.get("CLAUDE_CONFIG_DIR")
    if custom:
        base = Path(custom).expanduser()
        return base / ".claude.json", base
    return claude_config_path(real_home), claude_settings_path(real_home).parent


def _read_object(path: Path) -> dict[str, Any]:
    with FileLock(path):
        try:
            return parse_object(path.read_text(), str(path))
        except FileNotFoundError:
            return {}


def seed_home(
    real_home: Path,
    home: Path,
    env: Mapping[str, str],
    *,
    api_key: str | None = None,
    share_login: bool = False,
) -> list[str]:
    """Bring the session's home up to date; returns what went wrong. `api_key` is the pass
    the session presents to the gateway; `share_login` copies the operator's login in."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    config, config_dir = _config_sources(real_home, env)
    failures: list[str] = []
    try:
        account = _read_object(config).get(ACCOUNT) if share_login else None
    except (TrustFileError, OSError) as exc:
        failures.append(f"{config}: {exc}")
    else:
        failures += _update(
            claude_config_path(home), home, lambda data: session_config(data, api_key, account)
        )
    settings = config_dir / "settings.json"
    try:
        wanted = session_settings(_read_object(settings))
    except (TrustFileError, OSError, ValueError) as exc:
        failures.append(f"{settings}: {exc}")
    else:
        failures += _update(
            claude_settings_path(home), home, lambda data: None if data == wanted else wanted
        )
    failures += _login(config_dir / CREDENTIALS, home, share_login)
    return failures + write_git_identity(real_home, home)


def _update(
    path: Path, home: Path, edit: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> list[str]:
    """`edit` merged into the session home's file `path`; what went wrong, naming it (a file
    the session made larger than the spawner reads is reported here, left as it is)."""
    try:
        update_json_file(path, edit, home)
    except (TrustFileError, OSError, ValueError) as exc:
        return [f"{path}: {exc}"]
    return []


def _login(credentials: Path, home: Path, share_login: bool) -> list[str]:
    """The operator's login copied in when shared; else no login file in the home. Neither
    the write nor the removal follows a link the session planted."""
    relative = (claude_settings_path(home).parent.relative_to(home) / CREDENTIALS).as_posix()
    try:
        if share_login and credentials.is_file():
            write_within(home, relative, credentials.read_bytes(), 0o600)
        else:
            remove_within(home, relative)
    except OSError as exc:
        return [f"{credentials}: {exc}"]
    return []


def _plain_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def transcript_path(home: Path, session_id: str) -> Path | None:
    """Claude Code's transcript of `session_id` under `home` (`.claude/projects/<dir>/
    <session>.jsonl`), found without following a link; None when there is none."""
    if not _SESSION_ID_RE.fullmatch(session_id):
        return None
    projects = home / ".claude" / "projects"
    if not (_plain_dir(home) and _plain_dir(home / ".claude") and _plain_dir(projects)):
        return None
    try:
        entries = list(os.scandir(projects))
    except OSError:
        return None
    for entry in sorted(entries, key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        candidate = Path(entry.path) / f"{session_id}.jsonl"
        try:
            if stat.S_ISREG(os.lstat(candidate).st_mode):
                return candidate
        except OSError:
            continue
    return None
