"""Reading the older daemon's `cli-config.yaml` shapes into the App's config (pure).

The older daemon accepted shorter or richer spellings of some keys; `read_older_shapes`
rewrites them into the one shape `OperatorConfig` validates, and says what it adapted:

- `models` and `effort` entries may be bare names (`- opus`) as well as mappings;
- `routing.authorizedUsers` entries may be logins or `{github, slack, name}`: the login
  authorizes, a `slack` member id joins `slack.users` (Slack member → GitHub login);
- `routing.control.keywords.execute` names the execute keyword when
  `routing.trigger.executeKeyword` does not;
- effort levels are offered in their enum order (low, medium, high, xhigh, max), whatever
  order they are declared in; other names follow in declared order.

`unused_keys` walks the document against the pydantic models and names every key the App
does not read, so the operator hears once that it is ignored instead of getting an error.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

EFFORT_ORDER = ("low", "medium", "high", "xhigh", "max")
PERSON_KEYS = ("github", "slack")
UNUSED = "not used by the App; ignored"
NAME_UNUSED = "a display name; the App names people by their GitHub login"
# Why some keys are not read, where a better reason than UNUSED is known.
REASONS: Mapping[str, str] = {
    "routing.control.keywords": "only `execute` is configurable; the App's other replies are fixed",
}


class ShapeError(ValueError):
    """An older-shape entry cannot be read; the message starts with its key."""


@dataclass(frozen=True)
class Finding:
    """Something about a loaded config the operator should hear once (not per spawn)."""

    key: str
    message: str


@dataclass(frozen=True)
class CompatReading:
    """The document in the App's shape, and what was adapted, ignored or in conflict."""

    data: dict[str, Any]
    adapted: tuple[Finding, ...] = ()
    ignored: tuple[Finding, ...] = ()
    conflicts: tuple[Finding, ...] = ()


def _named_entries(value: Any) -> Any:
    """A list whose bare-string entries become `{name: …}` mappings."""
    if not isinstance(value, list):
        return value
    return [{"name": v} if isinstance(v, str) else v for v in value]


def _effort_rank(entry: Any) -> int:
    name = entry.get("name") if isinstance(entry, Mapping) else entry
    return EFFORT_ORDER.index(name) if name in EFFORT_ORDER else len(EFFORT_ORDER)


def _ordered_efforts(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return sorted(_named_entries(value), key=_effort_rank)  # stable: unknown names keep order


@dataclass
class _Notes:
    adapted: list[Finding]
    ignored: list[Finding]
    conflicts: list[Finding]


def _people(routing: dict[str, Any], slack: dict[str, Any], notes: _Notes) -> None:
    """`authorizedUsers` entries to logins; each entry's Slack id into `slack.users`."""
    field = "authorized_users" if "authorized_users" in routing else "authorizedUsers"
    entries = routing.get(field)
    if not isinstance(entries, list) or all(isinstance(e, str) for e in entries):
        return
    users = slack.get("users")
    users = dict(users) if isinstance(users, Mapping) else {}
    logins: list[Any] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            logins.append(entry)  # validation names the bad entry
            continue
        login = entry.get("github")
        if not isinstance(login, str) or not login:
            raise ShapeError(f"routing.authorizedUsers[{index}]: an entry needs a `github` login")
        where = f"routing.authorizedUsers[{login}]"
        logins.append(login)
        for key in entry:
            if key == "name":
                notes.ignored.append(Finding(f"{where}.name", NAME_UNUSED))
            elif key not in PERSON_KEYS:
                notes.ignored.append(Finding(f"{where}.{key}", UNUSED))
        member = entry.get("slack")
        if isinstance(member, str):
            if users.get(member, login) != login:
                notes.conflicts.append(
                    Finding(
                        f"{where}.slack",
                        f"slack.users maps {member} to {users[member]!r}; that mapping wins",
                    )
                )
                continue
            users[member] = login
            acts = f"Slack member {member} acts as @{login}"
            notes.adapted.append(Finding(f"{where}.slack", acts))
    routing[field] = logins
    slack["users"] = users


def _keyword(routing: dict[str, Any], notes: _Notes) -> None:
    """`control.keywords.execute` as the execute keyword unless `trigger` names one."""
    control = routing.get("control")
    keywords = control.get("keywords") if isinstance(control, Mapping) else None
    alias = keywords.get("execute") if isinstance(keywords, Mapping) else None
    if not isinstance(alias, str):
        return
    trigger = routing.get("trigger")
    trigger = dict(trigger) if isinstance(trigger, Mapping) else {}
    written = trigger.get("executeKeyword", trigger.get("execute_keyword"))
    key = "routing.control.keywords.execute"
    if written is not None and written != alias:
        message = f"routing.trigger.executeKeyword ({written!r}) wins over {alias!r}"
        notes.conflicts.append(Finding(key, message))
        return
    trigger["executeKeyword"] = alias
    routing["trigger"] = trigger
    notes.adapted.append(Finding(key, f"the execute keyword is {alias!r}"))


def read_older_shapes(document: Mapping[str, Any]) -> CompatReading:
    """`document` rewritten into the App's shapes, with notes on what changed (pure)."""
    data = dict(document)
    notes = _Notes([], [], [])
    for key in ("models", "effort"):
        value = data.get(key)
        if isinstance(value, list) and any(isinstance(v, str) for v in value):
            notes.adapted.append(Finding(key, "bare names read as {name: …} entries"))
    if "models" in data:
        data["models"] = _named_entries(data["models"])
    if "effort" in data:
        declared = _named_entries(data["effort"])
        data["effort"] = _ordered_efforts(declared)
        if data["effort"] != declared:
            names = ", ".join(str(e.get("name")) for e in data["effort"] if isinstance(e, Mapping))
            notes.adapted.append(Finding("effort", f"offered in level order: {names}"))
    routing = data.get("routing")
    if isinstance(routing, Mapping):
        routing = data["routing"] = dict(routing)
        slack = dict(data["slack"]) if isinstance(data.get("slack"), Mapping) else {}
        _people(routing, slack, notes)
        if slack:
            data["slack"] = slack
        _keyword(routing, notes)
    return CompatReading(data, tuple(notes.adapted), tuple(notes.ignored), tuple(notes.conflicts))


def _model_of(annotation: Any) -> tuple[bool, type[BaseModel]] | None:
    """(is a list, model) when `annotation` holds a pydantic model, else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False, annotation
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    if origin is list:
        inner = _model_of(get_args(annotation)[0])
        if inner is not None and not inner[0]:
            return True, inner[1]
    return None


def _entry_label(entry: Mapping[str, Any], index: int) -> str:
    name = entry.get("name")
    return name if isinstance(name, str) and name else str(index)


def unused_keys(data: Mapping[str, Any], model: type[BaseModel], path: str = "") -> list[Finding]:
    """Every key of `data` that `model` (and the models it nests) does not read."""
    fields: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if not info.exclude:
            fields[name] = info
            fields[info.alias or name] = info
    found: list[Finding] = []
    for key, value in data.items():
        here = f"{path}.{key}" if path else str(key)
        field = fields.get(str(key))
        if field is None:
            found.append(Finding(here, REASONS.get(path, UNUSED)))
            continue
        nested = _model_of(field.annotation)
        if nested is None:
            continue
        many, inner = nested
        if not many and isinstance(value, Mapping):
            found += unused_keys(value, inner, here)
        elif many and isinstance(value, list):
            for index, entry in enumerate(value):
                if isinstance(entry, Mapping):
                    found += unused_keys(entry, inner, f"{here}[{_entry_label(entry, index)}]")
    return found
