"""A work item's credential-route requests in the App: what spawners report as
`session.routes` is added up on the item, once per event, bounded, and ends its usage line."""

from __future__ import annotations

import uuid
from typing import Any

from app.config.operator_config import OperatorConfig
from app.store.tables import WorkItem
from app.workitems.spend.route_usage import MAX_ROUTES, added, routes_text
from app.workitems.spend.usage import usage_line_of


def routes(item: str, **counts: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": "session.routes",
        "work_item_id": item,
        "id": uuid.uuid4().hex,
        "routes": counts,
    }


def test_reports_add_up_on_the_item_and_end_its_usage_line(api) -> None:
    item = api.work_item(1)
    spawner = api.spawner(api.token())
    first = routes(item, STAGING_API_URL={"requests": 5, "refused": 1})
    answer = spawner.events(
        first,
        routes(item, STAGING_API_URL={"requests": 2}, PIP_INDEX_URL={"requests": 40}),
    )
    assert answer.status_code == 200 and answer.json()["accepted"] == 2
    assert spawner.events(first).json()["duplicates"] == 1  # resent: counted once
    with api.session() as db:
        row = db.get(WorkItem, item)
        assert row is not None
        assert row.session["routes"] == {
            "STAGING_API_URL": {"requests": 7, "refused": 1},
            "PIP_INDEX_URL": {"requests": 40, "refused": 0},
        }
        line = usage_line_of(db, row, OperatorConfig())
    assert line == (
        "**Usage:** routes: PIP_INDEX_URL 40 requests · STAGING_API_URL 7 requests (1 refused)"
    )


def test_a_report_is_bounded_like_any_other() -> None:
    got = added(
        {"A": {"requests": 1, "refused": 0}},
        {
            "A": {"requests": -3, "refused": True},
            "not a name": {"requests": 9},
            "B": {"requests": 10**12},
            "C": "many",
        },
    )
    assert got == {"A": {"requests": 1, "refused": 0}, "B": {"requests": 0, "refused": 0}}
    many = added({}, {f"R{i}": {"requests": 1} for i in range(MAX_ROUTES + 5)})
    assert len(many) == MAX_ROUTES
    assert routes_text({}) == "" and routes_text({"routes": "junk"}) == ""
