"""`/metrics` over a real server, parsed by prometheus_client's own text parser: what a
scraper sees after a label and an execute, and who may scrape."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.workitems.spend.usage import add_usage
from tests.gate_support import (
    ITEM,
    REPO,
    comment,
    deliver,
    labeled,
)
from tests.support import OPERATOR_TOKEN, fixture_bytes, post_webhook

SCRAPE = "a-scrape-token-of-its-own-0123"
pytestmark = [
    pytest.mark.admin_token,
    pytest.mark.app_env(THE_LOOP_METRICS_TOKEN=SCRAPE),
]


def scrape(url: str, token: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    resp = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(resp.text)
        for s in family.samples
    }


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_metrics_count_a_label_an_execute_and_a_forgery(running_app: Any, fake_github: Any):
    fake, _ = fake_github
    fake.grant(REPO, "Codertocat", "write")
    deliver(running_app, "issues", labeled(), "label-1")
    deliver(running_app, "issue_comment", comment("the-loop execute"), "exec-1")
    again = post_webhook(running_app.url, "issues", labeled(), delivery="label-1")
    assert again.json()["duplicate"] is True
    forged = post_webhook(
        running_app.url, "ping", fixture_bytes("github/ping.json"), secret="not-it"
    )
    assert forged.status_code == 401

    seen = scrape(running_app.url, SCRAPE)
    assert seen[("the_loop_webhook_deliveries_total", (("outcome", "new"),))] == 2
    assert seen[("the_loop_webhook_deliveries_total", (("outcome", "duplicate"),))] == 1
    assert seen[("the_loop_webhook_ack_seconds_count", ())] == 3
    assert seen[("the_loop_requests_refused", (("reason", "bad-signature"),))] == 1
    assert seen[("the_loop_work_items", (("status", "frozen"),))] == 1
    assert seen[("the_loop_jobs", (("kind", "spawn"), ("state", "queued")))] == 1
    assert ("the_loop_inbox_deliveries", (("state", "queued"),)) not in seen  # all handled
    assert seen[("the_loop_model_usage", (("kind", "input_tokens"),))] == 0  # no session yet
    with running_app.state.sessions() as db, db.begin():  # what a gateway reports
        add_usage(db, ITEM, {"input_tokens": 1200, "output_tokens": 30, "requests": 2})
    used = scrape(running_app.url, SCRAPE)
    assert used[("the_loop_model_usage", (("kind", "input_tokens"),))] == 1200
    assert used[("the_loop_model_usage", (("kind", "requests"),))] == 2
    assert scrape(running_app.url, OPERATOR_TOKEN).keys() == used.keys()  # the operator too


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_metrics_refuse_a_caller_without_a_credential(running_app: Any):
    for headers in ({}, {"Authorization": "Bearer not-the-scrape-token-at-all"}):
        resp = httpx.get(f"{running_app.url}/metrics", headers=headers)
        assert resp.status_code == 401 and "the_loop" not in resp.text
