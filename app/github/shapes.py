"""Does a delivery's body have the shape of the event its `X-GitHub-Event` header names?

The signature covers the body only, so the event-name header of a signed body can be
changed by anyone who has seen the body. Each event the App acts on has a shape here: the
keys that tell its body apart from every other routed event's, with the types the handlers
rely on. A body that does not fit is refused before it is stored.

Events the App does not route are not checked. They are stored as done and never read, so
refusing one for an unfamiliar shape would protect nothing, and would lose the audit of a
genuine delivery from a GitHub that added fields or events since. The check is also kept to
what tells events apart rather than a full schema: a field GitHub adds or drops that no
handler reads must never make the App refuse a real delivery.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Shape:
    """Keys a body must carry (with their JSON types) and keys it must not carry."""

    required: Mapping[str, type]
    absent: frozenset[str] = frozenset()
    # (object key, field) pairs whose value must be an integer, e.g. the number.
    numbers: tuple[tuple[str, str], ...] = ()


SHAPES: Mapping[str, Shape] = {
    "issues": Shape(
        {"action": str, "issue": dict, "repository": dict},
        absent=frozenset({"comment"}),
        numbers=(("issue", "number"),),
    ),
    "issue_comment": Shape(
        {"action": str, "issue": dict, "comment": dict, "repository": dict},
        numbers=(("issue", "number"), ("comment", "id")),
    ),
    "installation": Shape(
        {"action": str, "installation": dict},
        absent=frozenset({"repository", "repositories_added", "issue", "comment"}),
        numbers=(("installation", "id"),),
    ),
    "installation_repositories": Shape(
        {
            "action": str,
            "installation": dict,
            "repositories_added": list,
            "repositories_removed": list,
        },
        absent=frozenset({"repository", "issue", "comment"}),
        numbers=(("installation", "id"),),
    ),
    "pull_request": Shape(
        {"action": str, "pull_request": dict, "repository": dict},
        absent=frozenset({"issue", "comment", "review", "check_run", "check_suite"}),
        numbers=(("pull_request", "number"),),
    ),
    "pull_request_review": Shape(
        {"action": str, "review": dict, "pull_request": dict, "repository": dict},
        absent=frozenset({"issue", "comment"}),
        numbers=(("review", "id"), ("pull_request", "number")),
    ),
    "pull_request_review_comment": Shape(
        {"action": str, "comment": dict, "pull_request": dict, "repository": dict},
        absent=frozenset({"issue", "review"}),
        numbers=(("comment", "id"), ("pull_request", "number")),
    ),
    "check_run": Shape(
        {"action": str, "check_run": dict, "repository": dict},
        absent=frozenset({"issue", "comment", "pull_request", "check_suite"}),
        numbers=(("check_run", "id"),),
    ),
    "check_suite": Shape(
        {"action": str, "check_suite": dict, "repository": dict},
        absent=frozenset({"issue", "comment", "pull_request", "check_run"}),
        numbers=(("check_suite", "id"),),
    ),
}


def shape_problem(event: str, payload: Mapping[str, Any]) -> str | None:
    """Why `payload` cannot be a body of `event`, or None when it can (or is not checked)."""
    shape = SHAPES.get(event)
    if shape is None:
        return None
    for key, kind in shape.required.items():
        if not isinstance(payload.get(key), kind):
            return f"`{event}` bodies carry `{key}`"
    for key in sorted(shape.absent):
        if key in payload:
            return f"`{event}` bodies carry no `{key}`"
    for outer, inner in shape.numbers:
        value = payload[outer].get(inner)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"`{event}` bodies carry a numeric `{outer}.{inner}`"
    return None
