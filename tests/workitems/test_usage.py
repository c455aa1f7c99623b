"""A work item's model usage in the App: what spawners report as `session.usage` is added to
the item's totals once per event, and `/status` shows the totals per item."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from app.workitems.spend.usage import reported_counts, usage_of

ADMIN = "admin-token-for-the-usage-tests-0123456789"


SHARED_API = {"extra_env": {"THE_LOOP_ADMIN_TOKEN": ADMIN}}  # how serve_api runs this module's App


def usage(item: str, **counts: Any) -> dict[str, Any]:
    return {"event": "session.usage", "work_item_id": item, "id": uuid.uuid4().hex, **counts}


def test_reports_add_up_per_item_once_each_and_status_shows_them(api) -> None:
    item, other = api.work_item(1), api.work_item(2)
    spawner = api.spawner(api.token())
    first = usage(
        item,
        input_tokens=1200,
        output_tokens=30,
        cache_read_input_tokens=5000,
        cache_creation_input_tokens=700,
        requests=2,
    )
    answer = spawner.events(
        first,
        usage(item, input_tokens=10, output_tokens=5, requests=1),
        usage(other, input_tokens=1, requests=1),
    )
    assert answer.status_code == 200 and answer.json()["accepted"] == 3
    again = spawner.events(first)  # a batch resent after a lost answer
    assert again.json()["duplicates"] == 1
    with api.session() as db:
        totals = usage_of(db, [item, other, "github:o/r#404"])
    assert totals[item] == {
        "input_tokens": 1210,
        "output_tokens": 35,
        "cache_read_input_tokens": 5000,
        "cache_creation_input_tokens": 700,
        "requests": 3,
        "tool_calls": 0,
        "active_ms": 0,
    }
    assert totals[other]["input_tokens"] == 1 and totals[other]["requests"] == 1
    assert set(totals["github:o/r#404"].values()) == {0}
    status = httpx.get(f"{api.url}/status", headers={"Authorization": f"Bearer {ADMIN}"})
    shown = {row["work_item_id"]: row["usage"] for row in status.json()["recent"]}
    assert shown[item] == {**totals[item], "cost_usd": None}  # no model frozen: no price
    assert shown[other] == {**totals[other], "cost_usd": None}
    assert api.events("session.usage", item)  # in the event log as well


def test_a_report_about_an_item_the_spawner_does_not_serve_is_refused(api) -> None:
    item = api.work_item(1)
    stranger = api.spawner(api.token("stranger", ["someone/else"]))
    answer = stranger.events(usage(item, input_tokens=99, requests=1))
    assert answer.json()["accepted"] == 0 and answer.json()["rejected"]
    with api.session() as db:
        assert usage_of(db, [item])[item]["input_tokens"] == 0


def test_counts_that_are_not_counts_are_taken_as_zero() -> None:
    counts = reported_counts(
        {
            "input_tokens": -5,
            "output_tokens": True,
            "requests": "3",
            "cache_read_input_tokens": 10**13,
            "cache_creation_input_tokens": 4,
        }
    )
    assert counts == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 4,
        "requests": 0,
        "tool_calls": 0,
        "active_ms": 0,
    }
