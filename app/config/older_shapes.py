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

Keys of a person entry other than `github` and `slack` are judged by `app.config.known_keys`
(the older daemon's `name` is accepted; anything else is an error naming the key meant);
every problem is collected, none stops the reading.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.config.known_keys import Finding, older_key, unknown_key

EFFORT_ORDER = ("low", "medium", "high", "xhigh", "max")
PERSON_KEYS = ("github", "slack")


@dataclass(frozen=True)
class CompatReading:
    """The document in the App's shape, what was adapted, ignored or in conflict, and the
    entries that cannot be read (`problems`: errors, each naming its key)."""

    data: dict[str, Any]
    adapted: tuple[Finding, ...] = ()
    ignored: tuple[Finding, ...] = ()
    conflicts: tuple[Finding, ...] = ()
    problems: tuple[Finding, ...] = ()


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
    problems: list[Finding]


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
            where = f"routing.authorizedUsers[{index}]"
            notes.problems.append(Finding(where, "an entry needs a `github` login"))
            continue
        where = f"routing.authorizedUsers[{login}]"
        logins.append(login)
        for key in entry:
            if key in PERSON_KEYS:
                continue
            older = older_key(f"{where}.{key}")
            if older is not None:
                notes.ignored.append(Finding(f"{where}.{key}", older.why))
            else:
                notes.problems.append(unknown_key(where, str(key), (*PERSON_KEYS, "name")))
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
    notes = _Notes([], [], [], [])
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
    return CompatReading(
        data,
        tuple(notes.adapted),
        tuple(notes.ignored),
        tuple(notes.conflicts),
        tuple(notes.problems),
    )
