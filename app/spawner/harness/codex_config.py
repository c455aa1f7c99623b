"""The `config.toml` a Codex session's own `CODEX_HOME` gets. Pure: values in, text out.

It says everything an unattended session needs and nothing of the operator's credentials:

- the model provider is the model gateway (`base_url` the gateway's `/v1` as the session
  sees it, `wire_api = "responses"`, `env_key` the variable holding the session's pass);
- `approval_policy = "never"` and `sandbox_mode = "danger-full-access"`: the session runs
  inside the spawner's own bubblewrap sandbox, which is the boundary (Codex's own sandbox
  helper would nest a second one that fails there);
- no update check, no analytics, no plugins, `allow_login_shell = false` (a login shell
  resets PATH from /etc/profile and loses the tools the session needs);
- the checkout trusted (no "Trust this folder?" dialog);
- the stop gate as a `Stop` hook only for a session that runs unconfined (`stop_command`
  set); a sandboxed session's gate is in `managed_requirements`, which Codex reads from
  `/etc/codex/requirements.toml`: the launch shows it there read-only, so the session
  cannot delete that hook, and Codex runs a managed hook without review and lets no user
  setting disable it. The launch passes `--enable hooks`, a command-line setting above
  every config layer, so `[features] hooks = false` in a file the session writes (its
  `config.toml`, the checkout's `.codex/config.toml`) switches nothing off, and
  `--dangerously-bypass-hook-trust`, so no "Hooks need review" screen shows for a hook of
  the user layer or the checkout's `.codex/` (the managed one needs no review);
- from the operator's own `~/.codex/config.toml`, only the model settings (`CARRIED`) and,
  of the provider it selects, the settings that shape requests but hold no credential
  (`CARRIED_PROVIDER`: retries, timeouts, `query_params` such as Azure's `api-version`); its
  keys, headers, base URL, other providers, MCP servers, profiles and hooks stay out.

TOML is written by a tiny emitter for exactly these shapes (strings, numbers, booleans and
tables of them); strings are TOML basic strings, escaped as JSON escapes them (a subset
TOML accepts).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROVIDER = "the-loop-gateway"
PASS_VARIABLE = "THE_LOOP_MODEL_PASS"
# The operator's model settings a session keeps (scalars only).
CARRIED = (
    "model",
    "review_model",
    "model_reasoning_effort",
    "model_reasoning_summary",
    "model_verbosity",
    "model_context_window",
    "model_auto_compact_token_limit",
    "personality",
    "service_tier",
)
# Of the operator's selected provider: what shapes a request without naming a credential.
CARRIED_PROVIDER = (
    "request_max_retries",
    "stream_max_retries",
    "stream_idle_timeout_ms",
    "query_params",
)
HOOK_FEATURES = ("hooks", "codex_hooks")  # the feature's key and its older alias
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
Scalar = str | int | float | bool
Value = Scalar | dict[str, str]


@dataclass(frozen=True)
class CodexSetup:
    """What the session's config says beyond the fixed settings."""

    gateway_url: str  # as the session reaches it, without `/v1`
    checkout: str
    stop_command: str | None  # None: the managed requirements carry the stop gate
    carried: Mapping[str, Scalar]
    provider: Mapping[str, Value] = field(default_factory=dict)  # carried provider settings


def _provider_settings(data: dict[str, object]) -> dict[str, Value]:
    """`CARRIED_PROVIDER` of the provider the operator's config selects."""
    providers = data.get("model_providers")
    chosen = providers.get(str(data.get("model_provider"))) if isinstance(providers, dict) else None
    if not isinstance(chosen, dict):
        return {}
    kept: dict[str, Value] = {}
    for key in CARRIED_PROVIDER:
        value = chosen.get(key)
        if isinstance(value, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            kept[key] = dict(value)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            kept[key] = value
    return kept


def carried_settings(
    text: str, source: str
) -> tuple[dict[str, Scalar], dict[str, Value], list[str]]:
    """The operator's model settings and selected provider's request settings from their
    `config.toml` text, and what went wrong (a file that is not TOML gives nothing and one
    message naming it)."""
    if not text.strip():
        return {}, {}, []
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return {}, {}, [f"{source}: not valid TOML ({exc}); none of its settings were carried"]
    kept: dict[str, Scalar] = {}
    for key in CARRIED:
        value = data.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            kept[key] = value
    return kept, _provider_settings(data), []


def _key(name: str) -> str:
    return name if _BARE.match(name) else json.dumps(name)


def _value(value: Value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {json.dumps(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value)


def _table(header: str, values: Mapping[str, Any]) -> str:
    lines = [f"[{header}]"] if header else []
    lines += [f"{_key(k)} = {_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def session_config(setup: CodexSetup) -> str:
    """The whole `config.toml` of a session."""
    top: dict[str, Scalar] = {
        **setup.carried,
        "model_provider": PROVIDER,
        "approval_policy": "never",
        "sandbox_mode": "danger-full-access",
        "check_for_update_on_startup": False,
        "allow_login_shell": False,
        # OpenAI's hosted search runs beyond the session's network; the model gateway refuses
        # it unless `routing.sandbox.modelTools` lists it (then `-c web_search="live"` in
        # `routing.harnessArgs` turns it back on).
        "web_search": "disabled",
    }
    provider: dict[str, Value] = {
        **setup.provider,
        "name": "the-loop model gateway",
        "base_url": setup.gateway_url.rstrip("/") + "/v1",
        "wire_api": "responses",
        "env_key": PASS_VARIABLE,
    }
    parts = [
        "# Written by the-loop's spawner before each launch; edits here do not last.\n"
        + _table("", top),
        _table("analytics", {"enabled": False}),
        _table("features", {"plugins": False}),
        _table(f"model_providers.{_key(PROVIDER)}", provider),
        _table(f"projects.{_key(setup.checkout)}", {"trust_level": "trusted"}),
    ]
    if setup.stop_command is not None:
        parts.append(_stop_hook(setup.stop_command))
    return "\n".join(parts)


def _stop_hook(command: str) -> str:
    return "[[hooks.Stop]]\n\n" + _table(
        "[hooks.Stop.hooks]", {"type": "command", "command": command}
    )


def managed_requirements(host_text: str, source: str, stop_command: str) -> str:
    """The `requirements.toml` every sandboxed Codex session reads: the host's own
    requirements (`host_text`, read from `source`; empty when it has none), then the stop
    gate as a managed `Stop` hook. Hooks are switched on by the launch (`--enable hooks`, a
    command-line setting no config layer overrides), not pinned here: a pin here would also
    switch on the hooks of Codex's own helper threads (its title writer), each of which
    would then run the gate. Raises ValueError naming `source` when its text is not TOML,
    sets `hooks` (a second table would make the file invalid) or switches hooks off."""
    try:
        host = tomllib.loads(host_text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{source}: not valid TOML ({exc})") from exc
    features = host.get("features")
    off = isinstance(features, dict) and False in (features.get(k) for k in HOOK_FEATURES)
    if "hooks" in host or off:
        raise ValueError(
            f"{source} sets hooks, which the stop gate's own requirements set: move its "
            "hooks out of it, or the sessions would run without their gate"
        )
    head = host_text.rstrip("\n")
    return (head + "\n\n" if head else "") + "# The-loop's stop gate.\n" + _stop_hook(stop_command)
