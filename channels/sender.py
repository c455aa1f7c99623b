"""The Slack mirror: `post` queues inside the caller's transaction; a sender thread delivers.

The GitHub path never waits on Slack: `post` only adds an outbox row. The sender opens one
thread per work item (the first message sent becomes its parent; its `ts` is stored on the
work item) and replies in it from then on. A failed send is retried with backoff — a 429
waits exactly its `Retry-After` and pauses every send, since rate limits are per workspace —
and each failure is recorded as `slack.failed`, so an outage or a revoked token is visible
and its messages go out once Slack answers again. A message that can never go — Slack
refuses that message itself, or it cannot be rendered — is parked (`failed`) with its error
and an event, and the thread goes on with the next one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy import event, update
from sqlalchemy.orm import Session

from app.audit import EventLog
from app.retry import WakeLoop, queue_delay
from app.store import Once, Sessions, WorkItem
from channels import outbox
from channels.blocks import Kind, Message, checklist_closed, render
from channels.channel_errors import ChannelsError
from channels.errors import slack_error
from channels.replies import receipt_target

log = logging.getLogger(__name__)

DEFAULT_RATE_LIMIT_WAIT = 30.0
RECEIPT = "eyes"  # on a Slack reply the session received (GitHub comments get the same)
TEXT_ONLY_ERRORS = frozenset({"invalid_blocks", "invalid_blocks_format"})
MESSAGE_ERRORS = frozenset({"msg_too_long", "no_text", "invalid_arguments", "too_many_blocks"})


def checklist_key(work_item_id: str) -> str:
    """Where the Slack `ts` of an item's checklist message is kept (in the `once` table)."""
    return f"slack-checklist:{work_item_id}"


def utcnow() -> datetime:
    return datetime.now(UTC)


class Unrenderable(ChannelsError):
    """A row's payload could not be rendered into a message: retrying cannot help."""


@dataclass(frozen=True)
class Failure:
    """Why a send failed and what to do next."""

    error: str
    status: int | None
    retry_in: float
    permanent: bool = False
    rate_limited: bool = False


def classify(exc: Exception, attempts: int, base: float) -> Failure:
    """Turn a send error into a retry decision (pure, apart from reading the exception)."""
    if isinstance(exc, Unrenderable):
        return Failure(f"render: {exc}", None, 0.0, permanent=True)
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        error = str(data.get("error") or f"HTTP {status}")
        if status == 429:
            header = exc.response.headers.get("Retry-After") or exc.response.headers.get(
                "retry-after"
            )
            try:
                wait = max(1.0, float(header)) if header is not None else DEFAULT_RATE_LIMIT_WAIT
            except ValueError:
                wait = DEFAULT_RATE_LIMIT_WAIT
            return Failure(error, status, wait, rate_limited=True)
        if error in MESSAGE_ERRORS:
            return Failure(error, status, 0.0, permanent=True)
        return Failure(error, status, queue_delay(attempts, base))
    return Failure(f"{type(exc).__name__}: {exc}", None, queue_delay(attempts, base))


class SlackSender(WakeLoop):
    """Delivers outbox rows, oldest first, one work item's rows strictly in order."""

    thread_name = "slack-sender"

    def __init__(
        self,
        sessions: Sessions,
        events: EventLog,
        client: WebClient,
        channel: str | None,
        *,
        clock: Callable[[], datetime] = utcnow,
        base_delay: float = 1.0,
        poll: float = 0.5,
    ) -> None:
        self.sessions = sessions
        self.events = events
        self.client = client
        self.channel = channel
        self.clock = clock
        self.base_delay = base_delay
        self._paused_until: datetime | None = None
        super().__init__(poll)

    # --- one send -------------------------------------------------------------------------
    def run_once(self) -> bool:
        """Send one due row; False when nothing was due (or sends are paused by a 429)."""
        now = self.clock()
        if self._paused_until is not None and now < self._paused_until:
            return False
        row = outbox.claim_next(self.sessions, now)
        if row is None:
            return False
        try:
            self._deliver(row)
        except Exception as exc:  # the sender's edge: any failure becomes a retry
            self._failed(row, classify(exc, row.attempts, self.base_delay))
        return True

    def _thread_of(self, work_item_id: str) -> tuple[str | None, str]:
        with self.sessions() as session:
            item = session.get(WorkItem, work_item_id)
            return (item.slack_ts, item.html_url) if item is not None else (None, "")

    def _send(self, message: Message, thread_ts: str | None) -> dict[str, Any]:
        if not self.channel:
            raise RuntimeError("slack.channel is not configured")
        kwargs: dict[str, Any] = {"channel": self.channel, "unfurl_links": False}
        if thread_ts:
            kwargs["thread_ts"] = thread_ts
        try:
            response = self.client.chat_postMessage(**kwargs, **message.as_kwargs())
        except SlackApiError as exc:
            if exc.response.get("error") not in TEXT_ONLY_ERRORS:
                raise
            log.warning("Slack refused the blocks (%s); sending text only", exc.response["error"])
            response = self.client.chat_postMessage(**kwargs, text=message.text)
        return dict(response.data) if isinstance(response.data, dict) else {}

    def _deliver(self, row: outbox.Claimed) -> None:
        thread_ts, html_url = self._thread_of(row.work_item_id)
        try:
            message = render(
                row.kind, row.payload, row.work_item_id, str(row.payload.get("url") or html_url)
            )
        except Exception as exc:  # a payload no renderer takes: park it, never retry it
            raise Unrenderable(f"{type(exc).__name__}: {exc}") from exc
        if row.kind == Kind.PROGRESS and thread_ts and self.channel:
            # The thread's parent mirrors the progress comment: edited, never re-posted.
            self.client.chat_update(channel=self.channel, ts=thread_ts, **message.as_kwargs())
            with self.sessions() as session, session.begin():
                outbox.mark_sent(session, row.id)
            return
        data = self._send(message, thread_ts)
        ts = str(data.get("ts") or "")
        with self.sessions() as session, session.begin():
            outbox.mark_sent(session, row.id)
            if row.kind == Kind.CHECKLIST and ts:
                session.merge(Once(key=checklist_key(row.work_item_id), ref=ts))
            if thread_ts is None and ts:
                session.execute(
                    update(WorkItem)
                    .where(WorkItem.id == row.work_item_id, WorkItem.slack_ts.is_(None))
                    .values(slack_ts=ts)
                )
            self.events.emit(
                "slack.mirrored",
                row.work_item_id,
                session=session,
                kind=row.kind,
                channel=self.channel,
                ts=ts,
                thread_ts=thread_ts or ts,
                attempts=row.attempts,
            )
        self._receipt(row)
        if row.kind == Kind.CONFIRMATION:
            self._close_checklist(row.work_item_id, html_url)

    def _close_checklist(self, work_item_id: str, url: str) -> None:
        """Replace the thread's checklist control by the frozen decision, however it was made."""
        with self.sessions() as session:
            posted = session.get(Once, checklist_key(work_item_id))
            item = session.get(WorkItem, work_item_id)
            frozen = item.frozen if item is not None else None
        if posted is None or not posted.ref or not frozen or not self.channel:
            return
        message = checklist_closed(frozen, url)
        try:
            self.client.chat_update(channel=self.channel, ts=posted.ref, **message.as_kwargs())
        except (SlackApiError, OSError) as exc:  # the confirmation itself was sent
            log.warning("closing the checklist of %s failed: %s", work_item_id, slack_error(exc))

    def _receipt(self, row: outbox.Claimed) -> None:
        """React on a Slack thread reply once the session has it (like GitHub's receipt)."""
        target = receipt_target(row.kind, row.payload)
        if target is None:
            return
        try:
            self.client.reactions_add(channel=target[0], timestamp=target[1], name=RECEIPT)
        except (SlackApiError, OSError) as exc:  # the message itself was sent: never retry it
            error = slack_error(exc)
            if error != "already_reacted":
                log.warning("receipt reaction on %s failed: %s", target[1], error)

    def _failed(self, row: outbox.Claimed, failure: Failure) -> None:
        now = self.clock()
        if failure.rate_limited:
            self._paused_until = now + timedelta(seconds=failure.retry_in)
        if failure.permanent:
            outbox.mark_failed(self.sessions, row.id, failure.error)
        else:
            outbox.mark_retry(
                self.sessions, row.id, failure.error, now + timedelta(seconds=failure.retry_in)
            )
        log.warning("Slack send of %s for %s failed: %s", row.kind, row.work_item_id, failure.error)
        self.events.emit(
            "slack.failed",
            row.work_item_id,
            kind=row.kind,
            error=failure.error,
            status=failure.status,
            attempts=row.attempts,
            retry_in=None if failure.permanent else failure.retry_in,
            permanent=failure.permanent,
        )

    # --- the loop -------------------------------------------------------------------------
    def drain(self) -> int:
        count = 0
        while self.run_once():
            count += 1
        return count


class SlackMirror:
    """The `Mirror` the App uses when a bot token is configured."""

    def __init__(self, sender: SlackSender) -> None:
        self.sender = sender

    def post(self, session: Session, work_item_id: str, kind: str, payload: dict[str, Any]) -> None:
        """Queue a message in the caller's transaction; the sender wakes when it commits."""
        outbox.enqueue(session, work_item_id, kind, payload, self.sender.clock())
        event.listen(session, "after_commit", self._wake, once=True)

    def _wake(self, _session: Session) -> None:
        self.sender.wake.set()

    def start(self) -> None:
        self.sender.start()

    def stop(self) -> None:
        self.sender.stop()
