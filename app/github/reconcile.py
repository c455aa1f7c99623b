"""Reconciling the inbox with GitHub's delivery log, and pull mode.

GitHub does not try a failed webhook again on its own. A pass reads the App's delivery log
(`app.github.delivery_log`) newest first back to the newest entry it had already read (on
the very first pass: the last hour), and for each delivery whose guid — the
`X-GitHub-Delivery` a POST would have carried — is not in the inbox, it fetches the payload
and stores it through the same ingest writer and the same checks as a POSTed delivery
(`webhooks.decode`), marked `pulled`. Handlers cannot tell the two apart.

The signature cannot be checked on a pulled delivery: the log hands back the payload as
JSON, not the bytes GitHub signed. What vouches for it is the channel (GitHub's API, asked
with the App's own JWT). Its body hash is that of the JSON as re-serialised here, so it
rarely equals the hash of the same delivery POSTed; the guid is what makes one delivery
pushed and pulled count once.

`push` mode runs a pass on start and every THE_LOOP_RECONCILE_SECONDS; `pull` mode every
THE_LOOP_PULL_SECONDS, so the App needs no URL GitHub can reach. Every replica runs the
loop; a lease in the store (`app.store.log_lease`) lets one pass run at a time. A pass
spends at most its share of the App's hourly request budget (`log_plan.RequestBudget`) and stops
at a rate-limit answer, waiting as GitHub said (`delivery_log.wait_until`) before the next.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import orjson
from sqlalchemy import Engine

from app.github.client import GitHubApp, GitHubNotConfigured
from app.github.delivery_log import LogEntry, LogGone, LogReader, RateLimited, reading
from app.github.ingest import IngestWriter
from app.github.log_plan import (
    FIRST_LOOKBACK,
    PassCounts,
    RequestBudget,
    keep_newer,
    settled_cursor,
    to_fetch,
)
from app.github.webhooks import Answer, decode
from app.retry import WakeLoop
from app.store import LogState, Origin, inbox, log_lease

if TYPE_CHECKING:
    from app.audit import EventLog
    from app.config import Settings

log = logging.getLogger(__name__)

PASSED = "inbox.reconciled"  # the event each pass records
LEASE = timedelta(seconds=60)
RENEW_EVERY = 20  # requests between renewals of the lease during a long pass


class Reconciler:
    """One pass at a time over the delivery log, for one process."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        github: GitHubApp,
        ingest: IngestWriter,
        events: EventLog,
        clock: Callable[[], datetime],
        on_recovered: Callable[[], None] = lambda: None,
        *,
        one_pass: bool = False,
    ) -> None:
        """`one_pass`: a pass run on request (`the-loop inbox --reconcile`), which lets the
        lease go after it even in pull mode."""
        self.engine = engine
        self.github = github
        self.ingest = ingest
        self.events = events
        self.clock = clock
        self.on_recovered = on_recovered
        self.pull = settings.the_loop_ingress == "pull" and not one_pass
        self.share = settings.the_loop_log_budget_share
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.resumes_at: datetime | None = None  # no pass before this (a limit, the budget)

    @property
    def mode(self) -> str:
        return "pull" if self.pull else "reconcile"

    def run_pass(self) -> PassCounts | None:
        """Read the log back to the cursor and store what the inbox lacks. None when this
        pass did not run: another replica holds the lease, or GitHub said to wait."""
        now = self.clock()
        self.resumes_at = None
        state = log_lease.take(self.engine, self.holder, now, LEASE)
        if state is None:
            return None
        if state.not_before is not None and state.not_before > now:
            self.resumes_at = state.not_before
            log_lease.finish(self.engine, self.holder, state, self._keep_until(now))
            return None
        counts = PassCounts(self.mode)
        budget = RequestBudget.resume(self.share, state.window_start, state.window_requests, now)
        spent_before = budget.used
        seen_id: int | None = state.seen_id
        limited: RateLimited | None = None
        try:
            with reading(self.github.log_client(), self.clock) as reader:
                seen_id, limited = self._walk(reader, state, budget, counts, now)
        except RateLimited as exc:  # while listing: the cursor stays
            limited = exc
        except GitHubNotConfigured as exc:
            log.info("delivery log not read: %s", exc)
            log_lease.finish(self.engine, self.holder, state, now)
            return None
        except Exception as exc:  # GitHub or the store away: this pass ends, the next tries
            log.warning("delivery log pass failed: %s", exc)
            counts.error = f"{type(exc).__name__}: {exc}"[:300]
        # Every request counts, the refused and failed ones too.
        budget.used = max(budget.used, spent_before + counts.requests)
        self._conclude(state, counts, budget, seen_id, limited)
        return counts

    def _conclude(
        self,
        state: LogState,
        counts: PassCounts,
        budget: RequestBudget,
        seen_id: int | None,
        limited: RateLimited | None,
    ) -> None:
        """Record the pass (the row, its event) and when the next may ask GitHub again."""
        not_before, refusals = None, 0
        if limited is not None:
            counts.rate_limited = True
            refusals = state.refusals + 1
            not_before = limited.until
            log.warning("delivery log: %s", limited)
        elif counts.budget_spent:
            not_before = budget.resumes_at()
        counts.resumes_at = not_before.isoformat() if not_before else None
        self.resumes_at = not_before
        finished = self.clock()
        outcome = LogState(
            seen_id=seen_id,
            window_start=budget.window_start,
            window_requests=budget.used,
            not_before=not_before,
            refusals=refusals,
            last_pass={**counts.fields(), "at": finished.isoformat()},
        )
        log_lease.finish(self.engine, self.holder, outcome, self._keep_until(finished))
        if not self.pull or counts.missing or counts.rate_limited or counts.error:
            self.events.emit(PASSED, **counts.fields(), holder=self.holder)
        if counts.recovered:
            self.on_recovered()

    def _keep_until(self, now: datetime) -> datetime:
        """Pull mode keeps the lease between passes (one replica keeps pulling); a
        reconciling replica lets it go at the end of its pass."""
        return now + LEASE if self.pull else now

    def _walk(
        self,
        reader: LogReader,
        state: LogState,
        budget: RequestBudget,
        counts: PassCounts,
        now: datetime,
    ) -> tuple[int | None, RateLimited | None]:
        """List back to the cursor, fetch and store what is missing, oldest first. Returns
        the new cursor, and the refusal that cut the fetching short (if one did): once the
        listing reached the old cursor, the cursor moves past what was settled even when the
        budget or a rate limit ended the pass, so the next pass lists less."""
        floor = now - FIRST_LOOKBACK if state.seen_id is None else None
        entries: list[LogEntry] = []
        cursor: str | None = None
        reached = False
        limited: RateLimited | None = None
        try:
            while not self._spent(budget, counts):
                page, cursor = reader.page(cursor, state.refusals)
                self._count(reader, budget, counts)
                kept, reached = keep_newer(page, state.seen_id, floor)
                entries.extend(kept)
                if reached or cursor is None:
                    reached = True
                    break
            counts.listed = len(entries)
            guids = sorted({e.guid for e in entries})
            settled = inbox.known(self.engine, guids)
            missing = to_fetch(entries, settled)
            counts.missing = len(missing)
            for entry in missing:
                if self._spent(budget, counts):
                    break
                try:
                    self._recover(reader, entry, state.refusals, counts)
                except RateLimited as exc:
                    limited = exc
                    break
                self._count(reader, budget, counts)
                settled.add(entry.guid)
            else:
                counts.complete = reached
        finally:
            counts.requests = reader.requests
        return settled_cursor(entries, settled, state.seen_id, reached), limited

    def _spent(self, budget: RequestBudget, counts: PassCounts) -> bool:
        if budget.exhausted():
            counts.budget_spent = True
        return counts.budget_spent

    def _count(self, reader: LogReader, budget: RequestBudget, counts: PassCounts) -> None:
        budget.spend(reader.limits)
        if reader.requests % RENEW_EVERY == 0:
            log_lease.renew(self.engine, self.holder, self.clock(), LEASE)

    def _recover(
        self, reader: LogReader, entry: LogEntry, refusals: int, counts: PassCounts
    ) -> None:
        """Fetch one missing delivery and store it as a POSTed one would be."""
        try:
            sent, payload = reader.payload(entry.id, refusals)
        except LogGone:
            counts.skipped += 1
            return
        headers = {
            "x-github-event": sent.get("x-github-event") or entry.event,
            "x-github-delivery": sent.get("x-github-delivery") or entry.guid,
        }
        verdict = decode(headers, orjson.dumps(payload), None)
        if isinstance(verdict, Answer):
            if verdict.event is not None and verdict.event[0] == "webhook.rejected":
                counts.refused += 1
                _, fields = verdict.event
                self.events.emit("webhook.rejected", **fields, origin=Origin.PULLED.value)
            else:
                counts.skipped += 1  # a ping
            return
        new = self.ingest.store(
            verdict.delivery_id,
            verdict.event,
            verdict.action,
            verdict.body,
            verdict.lane,
            Origin.PULLED,
        )
        if new:
            counts.recovered += 1
        else:
            counts.duplicates += 1


class LogLoop(WakeLoop):
    """A process's reader of the log: a pass now, then every `interval` seconds, sooner or
    later when a pass was cut short (at the time GitHub or the budget allows)."""

    thread_name = "delivery-log"

    def __init__(self, reconciler: Reconciler, interval: float) -> None:
        super().__init__(interval)
        self.reconciler = reconciler
        self.interval = interval

    def run_once(self) -> bool:
        counts = self.reconciler.run_pass()
        resumes = self.reconciler.resumes_at
        self.poll = self.interval
        if resumes is not None and (counts is None or not counts.complete):
            self.poll = max(0.05, (resumes - self.reconciler.clock()).total_seconds())
        return False

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        try:
            log_lease.release(self.reconciler.engine, self.reconciler.holder)
        except Exception as exc:  # the store may be gone at exit; the lease then runs out
            log.info("delivery log lease not released: %s", exc)


def interval_of(settings: Settings) -> float | None:
    """Seconds between passes of a serving process; None: no loop (reconcile turned off)."""
    if settings.the_loop_ingress == "pull":
        return settings.the_loop_pull_seconds
    return settings.the_loop_reconcile_seconds or None
