"""Which harnesses can be offered and which is the default (spec 002's vocabulary).

A harness is offerable when the operator declared it AND a spawner adapter can host an
interactive session for it. Every fault shrinks to the default harness, never to another.
"""

from __future__ import annotations

from collections.abc import Collection

from app.config.operator_config import DEFAULT_HARNESS, ModelChoice, OperatorConfig

# The harness table: each harness the spawner can host in tmux → its adapter module (the
# spawner imports it, `app.spawner.harness.adapter_of`; the App reads the names only). A
# spawner reports the subset it can actually run (its executables present) when it registers.
ADAPTER_MODULES: dict[str, str] = {
    "claude": "app.spawner.harness.claude",
    "codex": "app.spawner.harness.codex",
}
HOSTING_ADAPTERS: frozenset[str] = frozenset(ADAPTER_MODULES)


def offered_harnesses(
    config: OperatorConfig, hosts: Collection[str] = HOSTING_ADAPTERS
) -> list[str]:
    """Declared ∩ hostable, in declaration order."""
    return [h.name for h in config.harnesses if h.name in hosts]


def default_harness(config: OperatorConfig, hosts: Collection[str] = HOSTING_ADAPTERS) -> str:
    """The `default: true` entry when it can host, else `routing.defaultHarness`, else claude."""
    for entry in config.harnesses:
        if entry.default and entry.name in hosts:
            return entry.name
    return config.routing.default_harness or DEFAULT_HARNESS


def models_for(config: OperatorConfig, harness: str) -> list[ModelChoice]:
    """Models offerable on `harness` (a model's `harnesses:` list narrows where it is offered)."""
    return [m for m in config.models if m.harnesses is None or harness in m.harnesses]


def resolve_harness(
    config: OperatorConfig, frozen: str, hosts: Collection[str] = HOSTING_ADAPTERS
) -> tuple[str, str | None]:
    """Re-validate a frozen harness read back from agent-writable state.

    Returns (harness, warning): the frozen one when declared and hostable, else the default
    with a warning saying why.
    """
    fallback = default_harness(config, hosts)
    if not frozen:
        return fallback, None
    if config.harness(frozen) is None and frozen != fallback:
        return fallback, f"frozen harness {frozen!r} is not declared; using {fallback!r}"
    if frozen not in hosts:
        return fallback, f"frozen harness {frozen!r} cannot host a session; using {fallback!r}"
    return frozen, None
