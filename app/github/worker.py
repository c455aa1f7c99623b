"""The inbox worker: claims stored deliveries and runs their handlers through the router.

A delivery is marked done in the same transaction as its handler's effects, so a crash at
any point re-runs the handler rather than losing the delivery. Failures back off and, after
`THE_LOOP_INBOX_ATTEMPTS` tries, the row is parked with its error for an operator to see.

Acknowledging comes before handling: while `yield_to` says the process's acknowledgements
are waiting (a flood: the ingest writer batches), a worker pauses before each claim, up to
`MAX_YIELDS` pauses in a row, so handlers neither take the GIL nor the SQLite write lock from
the webhooks GitHub times out on, yet never stop altogether. The backlog is handled in order
once the flood passes.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from app.github.router import Router
from app.github.services import HandlerContext, Services
from app.retry import Backoff
from app.store import InboxState, Sessions, inbox

log = logging.getLogger(__name__)


YIELD_PAUSE = 0.025  # seconds a worker steps back while acknowledgements wait
MAX_YIELDS = 8  # pauses in a row, then one delivery is handled anyway


class InboxWorker:
    def __init__(
        self,
        services: Services,
        sessions: Sessions,
        router: Router,
        name: str = "",
        yield_to: Callable[[], bool] | None = None,
    ) -> None:
        self.services = services
        self.yield_to = yield_to
        self.sessions = sessions
        self.router = router
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        self.wake = threading.Event()
        settings = services.settings
        self.retry = inbox.RetryPolicy(
            settings.the_loop_inbox_attempts,
            settings.the_loop_inbox_backoff_seconds,
            timedelta(seconds=settings.the_loop_inbox_lease_seconds),
        )
        self._stop = threading.Event()
        self._idle = True  # the last look found nothing due: look before claiming
        self._yields = 0

    def run_once(self) -> bool:
        """Handle one due delivery; returns False when there was none."""
        now = self.services.clock()
        with self.sessions.engine.connect() as conn:
            row = inbox.claim(conn, self.name, now, self.retry.lease, look_first=self._idle)
            self._idle = row is None
            if row is None:
                return False
            if row.attempts > 1:  # an operator sees each delivery taken up again, and why
                log.info(
                    "worker %s: delivery %s (%s.%s) claimed again, attempt %d of %d: its "
                    "last try failed, or the worker holding it stopped within its %d s lease",
                    self.name,
                    row.delivery_id,
                    row.event,
                    row.action,
                    row.attempts,
                    self.retry.attempts,
                    self.retry.lease.total_seconds(),
                )
            self._handle(conn, row)
        return True

    def _handle(self, conn: Connection, row: inbox.ClaimedDelivery) -> None:
        """Run the handlers of claimed `row` on `conn`; done commits with their effects."""
        try:
            with self.sessions(bind=conn, expire_on_commit=False) as session, session.begin():
                ctx = HandlerContext(
                    services=self.services,
                    session=session,
                    delivery_id=row.delivery_id,
                    event=row.event,
                    action=row.action,
                    body=row.body,
                )
                self.router.dispatch(ctx)
                inbox.mark_done(session, row, self.services.clock())
        except inbox.LeaseLost as exc:
            log.warning("%s", exc)  # rolled back: the newer claim handles it
        except Exception as exc:  # the one catch-all of this process edge
            log.exception("delivery %s (%s.%s) failed", row.delivery_id, row.event, row.action)
            detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            state = self._record_failure(row, detail)
            self.services.events.emit(
                "webhook.failed",
                delivery=row.delivery_id,
                gh_event=row.event,
                action=row.action,
                attempts=row.attempts,
                state=str(state),
                error=detail,
            )

    def _record_failure(self, row: inbox.ClaimedDelivery, detail: str) -> InboxState:
        """Record the failed try; while the database itself is away (often why the handler
        failed), keep trying, so the delivery is due again after its backoff rather than
        after its lease."""
        pause = Backoff(first=0.2, cap=5.0)
        give_up = time.monotonic() + self.retry.lease.total_seconds()
        while True:
            try:
                return inbox.mark_failed(
                    self.sessions.engine, row, detail, self.services.clock(), self.retry
                )
            except DBAPIError:
                if self._stop.is_set() or time.monotonic() > give_up:
                    raise
                log.warning("could not record the failure of %s; trying again", row.delivery_id)
                self._stop.wait(pause.next())

    def drain(self) -> int:
        """Handle every due delivery; returns how many were handled."""
        count = 0
        while self.run_once():
            count += 1
        return count

    def _step_back(self) -> bool:
        """Pause once if acknowledgements are waiting and the pauses in a row allow it."""
        if self.yield_to is None or self._yields >= MAX_YIELDS or not self.yield_to():
            self._yields = 0
            return False
        self._yields += 1
        self._stop.wait(YIELD_PAUSE)
        return True

    def run_forever(self, poll: float = 0.5) -> None:
        while not self._stop.is_set():
            if self._step_back():
                continue
            try:
                if self.run_once():
                    continue
            except Exception:
                log.exception("inbox worker loop error")
            self.wake.wait(poll)
            self.wake.clear()

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run_forever, name="inbox-worker", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()
