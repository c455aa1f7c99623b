"""Which keys of an operator config the App knows, and what it says of the others (pure).

The known keys are the pydantic models' own fields (camelCase alias or snake_case name), so a
field added to a model is known at once; no list of known keys is kept by hand. A key the
models do not know is either one of the older daemon's settings the App accepts without using
(`OLDER_DAEMON_KEYS`, the one list of them, each with where it is known from), reported once
as ignored, or an error naming the nearest known key: under `budget`, `sandbox` or `routing`
a typo would otherwise switch a limit off without a word.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

UNUSED = "not used by the App; ignored"
NAME_UNUSED = "a display name; the App names people by their GitHub login"
KEYWORDS_UNUSED = "only `execute` is configurable; the App's other replies are fixed"
EXAMPLE = "the older daemon's documented keys (tests/data/older-daemon-cli-config.yaml)"
LISTED = "the older daemon's own settings, listed when unknown keys became errors"
SPEC_000 = "spec 000 names it among the older daemon's routing keys (harness plugins)"
# How alike a written key and a known one must be (difflib's ratio) to be offered as meant.
NEAR = 0.75


@dataclass(frozen=True)
class Finding:
    """Something about a loaded config the operator should hear once (not per spawn)."""

    key: str
    message: str


@dataclass(frozen=True)
class OlderKey:
    """A key of the older daemon's `cli-config.yaml` the App accepts without using.
    `pattern` is a key path; `[]` stands for any list entry and `*` for any one key; the
    key's whole value (a section, a list) is accepted with it."""

    pattern: str
    why: str
    origin: str


OLDER_DAEMON_KEYS: tuple[OlderKey, ...] = (
    OlderKey("version", UNUSED, LISTED),
    OlderKey("state", UNUSED, LISTED),
    OlderKey("webhooks", UNUSED, LISTED),
    OlderKey("daemon", UNUSED, EXAMPLE),
    OlderKey("routing.enabled", UNUSED, LISTED),
    OlderKey("routing.pollIntervalSeconds", UNUSED, EXAMPLE),
    OlderKey("routing.harnessPlugins", UNUSED, SPEC_000),
    OlderKey("routing.control.keywords.*", KEYWORDS_UNUSED, EXAMPLE),
    OlderKey("routing.authorizedUsers[].name", NAME_UNUSED, EXAMPLE),
)


def generic_path(path: str) -> str:
    """`path` with every list entry's label as `[]`: `a[opus].b` → `a[].b`."""
    return re.sub(r"\[[^\]]*\]", "[]", path)


def older_key(path: str) -> OlderKey | None:
    """The older daemon's key `path` is, if any."""
    written = generic_path(path).split(".")
    for entry in OLDER_DAEMON_KEYS:
        pattern = entry.pattern.split(".")
        if len(pattern) == len(written) and all(
            p in ("*", w) for p, w in zip(pattern, written, strict=True)
        ):
            return entry
    return None


def _fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """The keys `model` reads — alias and name of every field a file may set."""
    fields: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if not info.exclude:
            fields[name] = info
            fields[info.alias or name] = info
    return fields


def display_names(model: type[BaseModel]) -> list[str]:
    """The keys of `model` as a file spells them (camelCase)."""
    return [info.alias or name for name, info in model.model_fields.items() if not info.exclude]


def nested_models(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """(how, model) for each model `annotation` holds: `one` (a section), `list` (entries)
    or `dict` (values under names)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("one", annotation)]
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (Union, types.UnionType):
        return [found for arg in args for found in nested_models(arg)]
    if origin in (list, tuple, Sequence) and args:
        return [("list", m) for how, m in nested_models(args[0]) if how == "one"]
    if origin in (dict, Mapping) and len(args) == 2:
        return [("dict", m) for how, m in nested_models(args[1]) if how == "one"]
    return []


def _entry_label(entry: Mapping[str, Any], index: int) -> str:
    name = entry.get("name")
    return name if isinstance(name, str) and name else str(index)


def _children(value: Any, how: str, here: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if how == "one" and isinstance(value, Mapping):
        yield here, value
    elif how == "list" and isinstance(value, list):
        for index, entry in enumerate(value):
            if isinstance(entry, Mapping):
                yield f"{here}[{_entry_label(entry, index)}]", entry
    elif how == "dict" and isinstance(value, Mapping):
        for name, entry in value.items():
            if isinstance(entry, Mapping):
                yield f"{here}.{name}", entry


def known_paths(model: type[BaseModel], path: str = "") -> Iterator[str]:
    """Every key path `model` and the models it nests read (list entries as `[]`)."""
    for key in display_names(model):
        here = f"{path}.{key}" if path else key
        yield here
        info = _fields(model)[key]
        for how, inner in nested_models(info.annotation):
            below = {"one": here, "list": f"{here}[]", "dict": f"{here}.*"}[how]
            yield from known_paths(inner, below)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def unknown_key(
    path: str, key: str, known: Sequence[str], root: type[BaseModel] | None = None
) -> Finding:
    """The error for `key` under `path`, which knows `known`: the nearest known key when one
    is close (or the same key elsewhere in the file's shape), else "unknown to this version"."""
    here = _join(path, key)
    by_lower = {k.lower(): k for k in known}
    near = difflib.get_close_matches(key.lower(), list(by_lower), n=1, cutoff=NEAR)
    if near:
        meant = _join(path, by_lower[near[0]])
        return Finding(here, f"unknown key — did you mean {meant}?")
    if root is not None:
        elsewhere = [p for p in known_paths(root) if p.rsplit(".", 1)[-1].lower() == key.lower()]
        if elsewhere:
            return Finding(here, f"unknown key here — did you mean {min(elsewhere, key=len)}?")
    listing = ", ".join(known) if known else "none"
    return Finding(here, f"unknown to this version of the-loop (known here: {listing})")


@dataclass(frozen=True)
class KeyCheck:
    """The older daemon's keys found (accepted, ignored) and the unknown ones (errors)."""

    older: tuple[Finding, ...]
    unknown: tuple[Finding, ...]


def check_keys(
    data: Mapping[str, Any],
    model: type[BaseModel],
    path: str = "",
    root: type[BaseModel] | None = None,
) -> KeyCheck:
    """Every key of `data` that `model` (and the models it nests) does not read: the older
    daemon's, with why they are ignored, and the others, with the key likely meant."""
    root = root or model
    fields = _fields(model)
    older: list[Finding] = []
    unknown: list[Finding] = []
    for key, value in data.items():
        here = _join(path, str(key))
        field = fields.get(str(key))
        if field is None:
            accepted = older_key(here)
            if accepted is not None:
                older.append(Finding(here, accepted.why))
            else:
                unknown.append(unknown_key(path, str(key), display_names(model), root))
            continue
        for how, inner in nested_models(field.annotation):
            entries = list(_children(value, how, here))
            for below, entry in entries:
                found = check_keys(entry, inner, below, root)
                older += found.older
                unknown += found.unknown
            if entries:
                break  # read as the first model whose shape the value has
    return KeyCheck(tuple(older), tuple(unknown))
