"""A work item's credential-route requests (`routing.sandbox.routes`): what spawners report
as `session.routes` (per route, requests passed and refused since the last report) added up
in the item's session facts, and the words the progress comment's usage line ends with.
Pure but for `add_route_counts`, which sets the item's facts in the caller's transaction.

A report is bounded like any other a spawner sends: a route's name is an environment
variable's, at most `MAX_ROUTES` routes are kept per item, a count that is not a whole
number in range is taken as zero.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from app.store import WorkItem

ROUTES_KEY = "routes"  # in the item's session facts: {env: {"requests": n, "refused": m}}
KINDS = ("requests", "refused")
MAX_ROUTES = 32
MAX_COUNT = 10**9  # no one report holds more
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _count(value: Any) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT
    return value if ok else 0


def added(current: Any, reported: Any) -> dict[str, dict[str, int]]:
    """The item's route counts `current` with one report added (pure)."""
    totals: dict[str, dict[str, int]] = {}
    if isinstance(current, Mapping):
        for name, counts in current.items():
            if isinstance(name, str) and isinstance(counts, Mapping):
                totals[name] = {kind: _count(counts.get(kind)) for kind in KINDS}
    for name, counts in reported.items() if isinstance(reported, Mapping) else ():
        if not (isinstance(name, str) and _NAME.match(name) and isinstance(counts, Mapping)):
            continue
        if name not in totals and len(totals) >= MAX_ROUTES:
            continue
        row = totals.setdefault(name, dict.fromkeys(KINDS, 0))
        for kind in KINDS:
            row[kind] += _count(counts.get(kind))
    return totals


def add_route_counts(item: WorkItem, reported: Any) -> bool:
    """Add a `session.routes` report to `item`'s facts; whether anything changed."""
    facts = dict(item.session or {})
    totals = added(facts.get(ROUTES_KEY), reported)
    if totals == facts.get(ROUTES_KEY, {}):
        return False
    item.session = {**facts, ROUTES_KEY: totals}
    return True


def routes_text(facts: Mapping[str, Any]) -> str:
    """`routes: STAGING_API_URL 12 requests (1 refused) · PIP_INDEX_URL 40 requests`, or ""
    while the item used no route (pure)."""
    totals = added(facts.get(ROUTES_KEY), {})
    parts = []
    for name, counts in sorted(totals.items()):
        refused = f" ({counts['refused']} refused)" if counts["refused"] else ""
        parts.append(f"{name} {counts['requests']} requests{refused}")
    return "routes: " + " · ".join(parts) if parts else ""
