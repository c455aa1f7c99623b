"""The configuration reference, made from the models themselves: every environment variable
of `Settings` and every key of the operator config (`OperatorConfig`), its default and what it
means. Pure: `reference_markdown()` is the text of `docs/reference/configuration.md`, and a
test fails when that file is not what this returns — so a setting added without an entry, or
an entry left behind by a removed one, is caught. `the-loop config reference` prints it.

A field's meaning is its attribute docstring (`use_attribute_docstrings`); a key of the
operator config without one is listed under its section, whose docstring says what it does.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

HEADER = """# Configuration reference

Made from the settings and config models by `the-loop config reference`; a test fails when
this page and the models differ. Two sources configure the App:

- **Environment variables** (or the `.env` file in the working directory): secrets, URLs,
  paths and the process's own limits. Read once per process.
- **The operator config** (`cli-config.yaml`, or the file `THE_LOOP_CONFIG` names): what
  sessions run, who may start them and how they are confined. Keys are camelCase. Keys of the
  older daemon's file that the App does not use are accepted and listed by
  `the-loop config check`; see the configuration guide for the rule on unknown keys.
"""


@dataclass(frozen=True)
class Entry:
    """One documented setting: its name as an operator writes it, its type, its default
    (as text) and its meaning (empty when only its section explains it)."""

    name: str
    kind: str
    default: str
    meaning: str


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in typing.get_args(annotation))
    if origin in (list, tuple, frozenset, set):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"map of {_type_name(args[1])}" if len(args) == 2 else "map"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return getattr(annotation, "__name__", str(annotation)).replace("ByteSize", "size")


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        try:
            value = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return "(computed)"
    elif info.default is PydanticUndefined:
        return "(required)"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return "(see below)"
    if isinstance(value, Enum):
        value = value.value
    if value is None:
        return "—"
    if value in ([], (), {}, frozenset()):
        return "empty"
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}…`"


def _one_line(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def setting_entries() -> list[Entry]:
    """Every environment variable `Settings` reads."""
    from app.config import Settings

    return [
        Entry(
            name.upper(), _type_name(info.annotation), _default(info), _one_line(info.description)
        )
        for name, info in Settings.model_fields.items()
    ]


def _models_in(annotation: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models a field's type holds, with the suffix its key takes (`[]` for a list's
    items, `.<name>` for a map's)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield "", annotation
    elif origin is typing.Annotated:
        yield from _models_in(args[0])
    elif origin in (typing.Union, types.UnionType):
        for arg in args:
            yield from _models_in(arg)
    elif origin in (list, tuple, frozenset, set) and args:
        yield from ((f"[]{s}", m) for s, m in _models_in(args[0]))
    elif origin is dict and len(args) == 2:
        yield from ((f".<name>{s}", m) for s, m in _models_in(args[1]))


def config_sections(
    model: type[BaseModel] | None = None, prefix: str = ""
) -> list[tuple[str, str, list[Entry]]]:
    """(section path, its meaning, its keys) for the operator config, depth first."""
    if model is None:
        from app.config import OperatorConfig

        model = OperatorConfig
    entries: list[Entry] = []
    nested: list[tuple[str, str, list[Entry]]] = []
    for name, info in model.model_fields.items():
        if info.exclude:  # what loading recorded (source, findings), never a key
            continue
        key = f"{prefix}{info.alias or name}"
        entries.append(
            Entry(key, _type_name(info.annotation), _default(info), _one_line(info.description))
        )
        seen: set[type[BaseModel]] = set()
        for suffix, inner in _models_in(info.annotation):
            if inner not in seen:
                seen.add(inner)
                nested += config_sections(inner, f"{key}{suffix}.")
    title = prefix.rstrip(".") or "(top level)"
    doc = _one_line((model.__doc__ or "").strip().split("\n\n")[0])
    return [(title, doc, entries), *nested]


def _table(entries: list[Entry], first: str) -> list[str]:
    lines = [f"| {first} | type | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{e.name}` | {e.kind} | {e.default} | {e.meaning} |" for e in entries]
    return lines


def reference_markdown() -> str:
    """The whole reference page."""
    lines = [HEADER, "## Environment variables", ""]
    lines += _table(setting_entries(), "variable")
    lines += ["", "## The operator config", ""]
    for title, doc, entries in config_sections():
        lines += [f"### `{title}`", ""]
        if doc:
            lines += [doc, ""]
        lines += [*_table(entries, "key"), ""]
    return "\n".join(lines).rstrip() + "\n"
