"""The inbox worker: exactly-once effects, retries with backoff, parking, lease expiry."""

from __future__ import annotations

import json
import logging
import time
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.audit import EventLog
from app.github.ingest import IngestWriter
from app.github.router import Router
from app.github.services import HandlerContext
from app.github.worker import MAX_YIELDS, InboxWorker
from app.store import Sessions, inbox
from app.store.tables import Delivery, Event, InboxState, Once


def store_delivery(engine, delivery_id="d-1", event="issues", action="opened"):
    """Store through the App's own intake, as the webhook endpoint does."""
    writer = IngestWriter(engine, EventLog(None))
    assert writer.store(
        delivery_id, event, action, json.dumps({"n": 1, "id": delivery_id}).encode()
    )


def effects(engine):
    with Session(engine) as session:
        return list(session.scalars(select(Once.key)))


def recording_handler(ctx: HandlerContext) -> None:
    ctx.session.add(Once(key=f"effect:{ctx.delivery_id}"))


def test_handler_effects_and_done_commit_together(store):
    engine, services, _ = store
    store_delivery(engine)
    worker = InboxWorker(
        services, Sessions(engine), Router({("issues", "opened"): [recording_handler]})
    )
    assert worker.drain() == 1
    assert worker.drain() == 0
    assert effects(engine) == ["effect:d-1"]


def test_a_worker_steps_back_while_acknowledgements_wait_yet_handles_everything(store):
    """A flood (the ingest writer pressed the whole time): before each claim the worker pauses
    its `MAX_YIELDS` times, then handles one delivery anyway, so nothing is starved."""
    engine, services, _ = store
    for n in range(3):
        store_delivery(engine, f"d-{n}")
    asked: list[float] = []

    def flooded() -> bool:
        asked.append(time.monotonic())
        return True

    router = Router({("issues", "opened"): [recording_handler]})
    worker = InboxWorker(services, Sessions(engine), router, yield_to=flooded)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while len(effects(engine)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.stop()
    assert sorted(effects(engine)) == ["effect:d-0", "effect:d-1", "effect:d-2"]
    assert len(asked) >= 3 * MAX_YIELDS


def test_failing_handler_rolls_back_backs_off_and_retries(store):
    engine, services, clock = store
    store_delivery(engine)
    calls = []

    def flaky(ctx: HandlerContext) -> None:
        calls.append(1)
        ctx.session.add(Once(key=f"partial-{len(calls)}"))
        if len(calls) < 3:
            raise RuntimeError("GitHub said 502")

    worker = InboxWorker(services, Sessions(engine), Router({("issues", None): [flaky]}))
    assert worker.run_once() is True
    assert worker.run_once() is False  # backing off: not due yet
    clock.now += timedelta(seconds=2)
    worker.run_once()
    clock.now += timedelta(seconds=10)
    worker.run_once()
    assert len(calls) == 3
    assert effects(engine) == ["partial-3"]  # failed attempts left nothing behind
    with Session(engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert row.state == InboxState.DONE and row.attempts == 3
        failures = session.scalars(select(Event).where(Event.event == "webhook.failed")).all()
        assert len(failures) == 2 and "GitHub said 502" in failures[0].data["error"]


def test_a_delivery_that_keeps_failing_is_parked_not_dropped(store):
    engine, services, clock = store
    store_delivery(engine)

    def broken(ctx: HandlerContext) -> None:
        raise ValueError("bad payload shape")

    worker = InboxWorker(services, Sessions(engine), Router({("issues", "opened"): [broken]}))
    for _ in range(inbox.MAX_ATTEMPTS):
        assert worker.run_once()
        clock.now += timedelta(minutes=10)
    assert worker.run_once() is False
    with Session(engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert row.state == InboxState.PARKED
        assert "bad payload shape" in row.last_error
    assert inbox.requeue(engine, "d-1", clock.now)
    with Session(engine) as session:
        assert session.scalars(select(Delivery)).one().state == InboxState.QUEUED


def test_a_claim_whose_worker_died_is_taken_again_after_the_lease(store, caplog):
    caplog.set_level(logging.INFO, logger="app.github.worker")
    engine, services, clock = store
    store_delivery(engine)
    with engine.connect() as conn:
        dead = inbox.claim(conn, "worker-that-died", clock.now)
    assert dead is not None
    worker = InboxWorker(
        services, Sessions(engine), Router({("issues", "opened"): [recording_handler]})
    )
    assert worker.run_once() is False  # still leased to the dead worker
    clock.now += inbox.LEASE + timedelta(seconds=1)
    assert worker.run_once() is True
    assert effects(engine) == ["effect:d-1"]
    (line,) = [r.getMessage() for r in caplog.records if "claimed again" in r.getMessage()]
    assert "delivery d-1 (issues.opened) claimed again, attempt 2 of 8" in line


def test_unrouted_deliveries_are_marked_done(store):
    engine, services, _ = store
    store_delivery(engine, event="star", action="created")
    worker = InboxWorker(services, Sessions(engine), Router({}))
    assert worker.drain() == 1
    with Session(engine) as session:
        assert session.scalars(select(Delivery)).one().state == InboxState.DONE


def test_a_worker_whose_lease_ran_out_mid_handler_commits_nothing(store):
    """The newer claim's run is the one that counts: the slow run's effects roll back."""
    engine, services, clock = store
    store_delivery(engine)
    runs: list[str] = []

    def slow(ctx: HandlerContext) -> None:
        runs.append("slow")
        ctx.session.add(Once(key="effect:slow"))
        if len(runs) == 1:  # while it works, its lease runs out and another worker takes over
            clock.now += inbox.LEASE + timedelta(seconds=1)
            assert other.run_once()

    def quick(ctx: HandlerContext) -> None:
        ctx.session.add(Once(key="effect:quick"))

    other = InboxWorker(
        services, Sessions(engine), Router({("issues", "opened"): [quick]}), "other"
    )
    worker = InboxWorker(services, Sessions(engine), Router({("issues", "opened"): [slow]}), "slow")
    assert worker.run_once()
    assert effects(engine) == ["effect:quick"]
    with Session(engine) as session:
        row = session.scalars(select(Delivery)).one()
        assert (row.state, row.claimed_by) == (InboxState.DONE, "other")
