"""What a session's environment holds: built from nothing, never inherited.

The spawner runs with whatever its operator's shell or service unit holds (cloud keys, a
database password, a personal token); a session runs text anyone who can open an issue
wrote. So a session's environment is an allow-list, and `session_environment` is its one
owner: the names a harness needs (`HARNESS_VARIABLES`, `LC_*`), the certificate bundles
(`CA_VARIABLES`) and the proxy (`PROXY_VARIABLES`) the spawner's environment sets, and the
names the operator lists in `routing.sandbox.env.passEnv`, their values taken from the
spawner's own environment only. Nothing else — nor a name nobody thought of — reaches a
session. The App's credentials and the operator's model keys are never passed, even when
listed (`NEVER_PASSED`): a session holds the pass and token the spawner mints for it, and
those travel apart (the tmux runner's hidden variables), never on a command line.

The tmux server's global environment is made of this and nothing more, so every session
(sandboxed or `routing.sandbox.mode: none`) starts from it; the spawner adds per-session,
non-secret values (`THE_LOOP_WORK_ITEM`, the gateway's URL, the proxy of its closed network).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from app.gateway import CREDENTIAL_VARIABLES

# `IS_SANDBOX` is how an operator running sessions as root tells Claude Code they are confined.
HARNESS_VARIABLES = ("PATH", "HOME", "LANG", "LANGUAGE", "TERM", "TZ", "IS_SANDBOX")
LOCALE_PREFIX = "LC_"
# Where the spawner's environment names the certificates it trusts (an App behind TLS with
# a private CA): a session is given the variables, and shown the files they name.
CA_VARIABLES = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "NODE_EXTRA_CA_CERTS",
)
# A proxy URL may carry a user and password: doctor names these, never shows them.
PROXY_VARIABLES = tuple(
    name
    for base in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")
    for name in (base, base.upper())
)
# Minted per session by the spawner, passed through tmux's client environment only.
MINTED_VARIABLES = ("THE_LOOP_SESSION_TOKEN", "ANTHROPIC_API_KEY", "THE_LOOP_MODEL_PASS")
# The App's own credentials: no `passEnv` entry passes one.
APP_SECRETS = (
    "GH_TOKEN",
    "GITHUB_TOKEN",
    "GITHUB_APP_ID",
    "GITHUB_PRIVATE_KEY",
    "GITHUB_PRIVATE_KEY_PATH",
    "GITHUB_WEBHOOK_SECRET",
    "GITHUB_CLIENT_ID",
    "GITHUB_CLIENT_SECRET",
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "THE_LOOP_SPAWNER_TOKEN",
    "THE_LOOP_GIT_TOKEN",
    "THE_LOOP_ADMIN_TOKEN",
    "THE_LOOP_METRICS_TOKEN",
    "DATABASE_URL",
    "GIT_ASKPASS",
)
NEVER_PASSED = frozenset({*APP_SECRETS, *CREDENTIAL_VARIABLES, *MINTED_VARIABLES, "TMUX"})


def harness_variable(name: str) -> bool:
    """Is `name` one a harness needs whatever the operator lists (its value no secret)?"""
    return name in HARNESS_VARIABLES or name.startswith(LOCALE_PREFIX) or name in CA_VARIABLES


def allowed(name: str, pass_env: Iterable[str] = ()) -> bool:
    """May `name` reach a session from the spawner's environment?"""
    if name in NEVER_PASSED:
        return False
    return harness_variable(name) or name in PROXY_VARIABLES or name in set(pass_env)


def session_environment(
    spawner_env: Mapping[str, str], pass_env: Iterable[str] = ()
) -> dict[str, str]:
    """The environment every session starts from: of `spawner_env`, only the allowed names
    (pure)."""
    listed = set(pass_env)
    return {k: v for k, v in spawner_env.items() if allowed(k, listed)}


def refused_names(pass_env: Iterable[str]) -> list[str]:
    """The `passEnv` names that are never passed (a credential of the App or the model)."""
    return sorted(set(pass_env) & NEVER_PASSED)


@dataclass(frozen=True)
class Shown:
    """One variable a session will get, as `the-loop doctor` prints it: a harness
    variable's value; only the name of a proxy (it may hold a password) or a passed one."""

    name: str
    value: str | None


def described(spawner_env: Mapping[str, str], pass_env: Iterable[str] = ()) -> list[Shown]:
    """What a session will get from `spawner_env`, sorted by name, plus the names minted
    per session (pure)."""
    base = session_environment(spawner_env, pass_env)
    shown = [Shown(k, v if harness_variable(k) else None) for k, v in base.items()]
    shown += [Shown(name, None) for name in ("THE_LOOP_SESSION_TOKEN",)]
    return sorted(shown, key=lambda s: s.name)
