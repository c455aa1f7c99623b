"""`/metrics`: what this App process and its store are doing, in Prometheus' text format.

Two kinds of figures, kept apart on purpose:

- this process's own counters (`Meters`): deliveries acknowledged, the acknowledgement's
  latency, requests refused by reason. Every replica (every serving process) exposes its
  own; a scraper adds them up across targets.
- the store's present state (`StoreCollector`), read when scraped: deliveries waiting or
  parked in the inbox, jobs by kind and state, work items by status, model tokens and their
  cost by harness and model, sessions stopped by their budget, each spend cap against its
  window's spend. Every replica reports
  the same shared figures, so a dashboard takes one replica's value (`max`), never the sum.

The route is behind the operator credential, or a scrape token of its own
(`THE_LOOP_METRICS_TOKEN`) so a scraper never holds the operator's. Nothing is registered in
prometheus_client's global registry: each App builds its own (`Meters`) at start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, Response, current_app, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.config import OperatorConfig
from app.protocol import USAGE_FIELDS
from app.store import Delivery, InboxState, Job, JobState, Sessions, WorkItem, WorkItemUsage
from app.web import auth
from app.workitems import TOKEN_KINDS, by_choice, spend_report

bp = Blueprint("metrics", __name__)

# Seconds from a verified body to its 202: storing it durably is nearly all of it.
ACK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
NOT_REFUSALS = frozenset({"webhook.received"})  # a ping is counted beside the refusals


class Meters:
    """This process's counters and the registry `/metrics` renders (one per App)."""

    def __init__(
        self, sessions: Sessions, refusals: Any, config: Callable[[], OperatorConfig] | None = None
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.acknowledged = Counter(
            "the_loop_webhook_deliveries",
            "Deliveries acknowledged by this process, new or a duplicate of one stored",
            ["outcome"],
            registry=self.registry,
        )
        self.ack_seconds = Histogram(
            "the_loop_webhook_ack_seconds",
            "Seconds from a verified delivery to its acknowledgement (stored durably)",
            buckets=ACK_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(StoreCollector(sessions, refusals, config))

    def acknowledge(self, new: bool, since: float) -> None:
        self.acknowledged.labels("new" if new else "duplicate").inc()
        self.ack_seconds.observe(max(0.0, time.perf_counter() - since))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class StoreCollector(Collector):
    """Figures read from the store (and the refusal counts) each time `/metrics` is scraped."""

    def __init__(
        self, sessions: Sessions, refusals: Any, config: Callable[[], OperatorConfig] | None = None
    ) -> None:
        self.sessions = sessions
        self.refusals = refusals  # the process's SampledLog: `totals` by reason
        self.config = config or OperatorConfig  # prices for the cost by model

    def collect(self) -> Iterator[Metric]:
        refused = GaugeMetricFamily(
            "the_loop_requests_refused",
            "Requests this process refused since it started, by reason (a counter's value)",
            labels=["reason"],
        )
        for reason, count in sorted(dict(self.refusals.totals).items()):
            if reason not in NOT_REFUSALS:
                refused.add_metric([reason], count)
        yield refused
        with self.sessions() as session:
            yield _by(
                session,
                "the_loop_inbox_deliveries",
                "Deliveries waiting in the inbox (queued) or parked after failing",
                [Delivery.state],
                Delivery.state.in_([InboxState.QUEUED, InboxState.PARKED]),
                ["state"],
            )
            yield _by(
                session,
                "the_loop_inbox_failing_deliveries",
                "Queued deliveries whose handler has failed at least once",
                [],
                (Delivery.state == InboxState.QUEUED) & (Delivery.attempts > 0),
                [],
            )
            yield _by(
                session,
                "the_loop_jobs",
                "Spawner jobs by kind and state (done and failed ones until pruned)",
                [Job.kind, Job.state],
                Job.state.in_(list(JobState)),
                ["kind", "state"],
            )
            yield _tokens(session)
            yield from _by_choice(session, self.config())
            yield from _caps(session, self.config())
            yield _by(
                session,
                "the_loop_work_items",
                "Work items by status (a session's state: running, stalled, exited …)",
                [WorkItem.state],
                WorkItem.state.is_not(None),
                ["status"],
            )


def _tokens(session: Session) -> GaugeMetricFamily:
    """Model tokens and requests every work item used, as the gateways counted them."""
    family = GaugeMetricFamily(
        "the_loop_model_usage",
        "Model tokens (by kind) and requests used by all work items, counted at the gateways",
        labels=["kind"],
    )
    sums = session.execute(select(*(func.sum(getattr(WorkItemUsage, f)) for f in USAGE_FIELDS)))
    for name, total in zip(USAGE_FIELDS, sums.one(), strict=True):
        family.add_metric([name], int(total or 0))
    return family


def _by_choice(session: Session, config: OperatorConfig) -> Iterator[Metric]:
    """Tokens and cost by the harness and model items ran on, and the budget stops."""
    tokens = GaugeMetricFamily(
        "the_loop_model_tokens",
        "Model tokens used, by the harness and model the items ran on and the kind of token",
        labels=["harness", "model", "kind"],
    )
    cost = GaugeMetricFamily(
        "the_loop_model_cost_usd",
        "Dollars the model usage cost at the configured or shipped prices, by harness and "
        "model (models without a price are left out)",
        labels=["harness", "model"],
    )
    stops = GaugeMetricFamily(
        "the_loop_budget_stops",
        "Sessions stopped because their work item's budget was spent (a counter's value)",
    )
    rows = session.execute(
        select(WorkItemUsage, WorkItem.frozen, WorkItem.session).join(
            WorkItem, WorkItem.id == WorkItemUsage.work_item_id
        )
    )
    spent = by_choice(((u.counts(), f, s) for u, f, s in rows), config)
    for (harness, model), (counts, dollars) in sorted(spent.items()):
        for kind in TOKEN_KINDS:
            tokens.add_metric([harness, model, kind], counts.get(kind, 0))
        if dollars is not None:
            cost.add_metric([harness, model], dollars)
    budgets = session.scalars(select(WorkItem.budget).where(WorkItem.budget.is_not(None)))
    stops.add_metric([], sum(int((b or {}).get("stops") or 0) for b in budgets))
    yield tokens
    yield cost
    yield stops


def _caps(session: Session, config: OperatorConfig) -> Iterator[Metric]:
    """Each daily and monthly spend cap against what its window spent (`spend_report`)."""
    labels = ["window", "scope", "installation", "repository", "kind"]
    limit = GaugeMetricFamily(
        "the_loop_spend_cap_limit",
        "A daily or monthly spend cap (tokens, or dollars) of an installation or repository",
        labels=labels,
    )
    spent = GaugeMetricFamily(
        "the_loop_spend_cap_spent",
        "What the cap's UTC day or month spent so far, against `the_loop_spend_cap_limit`",
        labels=labels,
    )
    for row in spend_report(config, session, datetime.now(UTC)):
        values = [row.window.value, row.scope, str(row.installation_id), row.repository, row.kind]
        limit.add_metric(values, row.limit)
        spent.add_metric(values, row.spent)
    yield limit
    yield spent


def _by(
    session: Session,
    name: str,
    documentation: str,
    columns: list[Any],
    where: Any,
    labels: list[str],
) -> GaugeMetricFamily:
    """A gauge of row counts grouped by `columns` (one sample when there are none)."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    query = select(*columns, func.count()).where(where)
    if columns:
        query = query.group_by(*columns)
    for row in session.execute(query):
        *values, count = row
        family.add_metric([str(v) for v in values], int(count))
    return family


@bp.get("/metrics")
def metrics() -> Response:
    state = current_app.extensions["the-loop"]
    settings = state.services.settings
    given = auth.bearer(request.headers.get("Authorization"))
    scrape = settings.the_loop_metrics_token
    allowed = bool(given and scrape and auth.same_secret(given, scrape))
    if not allowed:
        decision = auth.decide(
            settings.the_loop_admin_token,
            authorization=request.headers.get("Authorization"),
            query_token=None,
            cookie=request.cookies.get(auth.COOKIE),
            now=time.time(),
        )
        allowed = decision.allowed and decision.access is not auth.Access.LOGIN
    if not allowed:
        return Response(
            "the operator credential or THE_LOOP_METRICS_TOKEN is needed\n",
            status=401,
            headers={"WWW-Authenticate": 'Bearer realm="the-loop metrics"'},
            mimetype="text/plain",
        )
    return Response(state.meters.render(), content_type=CONTENT_TYPE_LATEST)
