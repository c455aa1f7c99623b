"""What governs money, reach, isolation and human approval in a loaded operator config: each
setting with the value in force and where it came from (pure; the one owner of that table).

Every setting of `routing.budget`, `routing.sandbox` and `routing.gates` is shown (a field
added to any of them appears without more), with `routing.maxSessions` and each harness's launch
arguments (through `harness_args`, their one resolver). A value comes from the file when the
file wrote it, from each spawner's environment where the config leaves it to the environment
(the model credentials), else it is the default. `config check`, `doctor` and the status page
all show this table.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ByteSize, SecretStr

from app.config.operator_config import DEFAULT_HARNESS, OperatorConfig, harness_args

FILE = "file"
ENVIRONMENT = "environment"
DEFAULT = "default"
NO_LIMIT = "no limit"
# The sections shown whole, and the settings whose `null` means no limit at all.
SECTIONS = ("budget", "sandbox", "gates")
LIMITS = ("routing.budget.", "routing.sandbox.limits.", "routing.maxSessions")
# A setting the config may leave to the spawner's environment: what is used then.
FROM_ENVIRONMENT: Mapping[str, str] = {
    "routing.sandbox.apiKeyFile": "the spawner's ANTHROPIC_API_KEY, else its ANTHROPIC_AUTH_TOKEN",
    "routing.sandbox.openaiKeyFile": "the spawner's OPENAI_API_KEY",
}


@dataclass(frozen=True)
class InForce:
    """One setting: its key as the file spells it, the value in force, where it came from."""

    key: str
    value: str
    source: str


def shown(key: str, value: Any) -> str:
    """`value` as the operator reads it; a mapping shows its names only (never its values,
    which may be secrets)."""
    if value is None:
        return NO_LIMIT if key.startswith(LIMITS) else "none"
    if isinstance(value, SecretStr):
        return "(set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, ByteSize):
        return value.human_readable(decimal=False)
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ", ".join(str(k) for k in value) or "none"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(shown(key, v) for v in value) or "none"
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _section(model: BaseModel, path: str, written: bool) -> Iterator[InForce]:
    """A row per setting of `model`, nested sections flattened."""
    for name, info in type(model).model_fields.items():
        if info.exclude:
            continue
        key = f"{path}.{info.alias or name}"
        value = getattr(model, name)
        here = written and name in model.model_fields_set
        if isinstance(value, BaseModel):
            yield from _section(value, key, here)
        elif value is None and not here and key in FROM_ENVIRONMENT:
            yield InForce(key, FROM_ENVIRONMENT[key], ENVIRONMENT)
        else:
            yield InForce(key, shown(key, value), FILE if here else DEFAULT)


def _launch_arguments(config: OperatorConfig) -> Iterator[InForce]:
    names = [h.name for h in config.harnesses] or [DEFAULT_HARNESS]
    for name in names:
        args = " ".join(harness_args(config, name)) or "none"
        entry = config.harness(name)
        if entry is not None and entry.args is not None:
            yield InForce(f"harnesses[{name}].args", args, FILE)
        elif name in config.routing.harness_args:
            yield InForce(f"routing.harnessArgs.{name}", args, FILE)
        else:
            yield InForce(f"harnesses[{name}].args", args, DEFAULT)


def in_force(config: OperatorConfig) -> list[InForce]:
    """Every setting that governs what a work item may spend, what its session reaches, how
    it is confined and where it stops for approval, with the value in force and its source."""
    routing = config.routing
    written = "routing" in config.model_fields_set
    rows: list[InForce] = []
    for section in SECTIONS:
        fields_of = type(routing).model_fields
        info = fields_of[section]
        here = written and section in routing.model_fields_set
        rows += _section(getattr(routing, section), f"routing.{info.alias or section}", here)
    sandbox = routing.sandbox
    mode = sandbox.resolved.value + (
        "" if sandbox.mode == sandbox.resolved else f" (from {sandbox.mode!r})"
    )
    rows = [InForce(r.key, mode, r.source) if r.key == "routing.sandbox.mode" else r for r in rows]
    limit = written and "max_sessions" in routing.model_fields_set
    rows.append(
        InForce(
            "routing.maxSessions",
            shown("routing.maxSessions", routing.max_sessions),
            FILE if limit else DEFAULT,
        )
    )
    rows += _launch_arguments(config)
    return rows
