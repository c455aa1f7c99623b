"""Keeping each work item's one progress comment (and its Slack thread's parent) true.

Any flush that changes what the comment shows — status, phase, gate decisions, artifacts,
session facts, pull request — bumps the item's `progress_rev` and makes it due a few seconds
later. That watch (`ProgressWatch`) is wired explicitly: `build_state` (the App, its
workers, the Slack runner) hangs it on the App's `Sessions`, and the App's shutdown takes it
off; importing this module wires nothing, and a session the App did not open is left alone.
`ProgressPublisher` renders due items and posts the comment the first time, edits it after:
a burst of changes becomes one edit, and a change made while an edit is in flight is caught
by the revision check. GitHub errors are retried by githubkit (5xx, 429) and then by the
publisher's own backoff.

The publisher also posts what an execute owes the issue: the confirmation, recorded on the
item (`confirmation_owed`) in the transaction that queues the spawn job, so the job reaches
a spawner without waiting for GitHub. `publish_soon` makes such an item due at once and
wakes the App's publishers when the transaction commits; a publisher started later
(after a crash) finds it due. The confirmation goes first, in the same pass as the progress
comment, so the issue never shows the progress comment of a run its confirmation has not
announced; `post_once` finds a confirmation a crashed pass had already posted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from githubkit.exception import GitHubException
from sqlalchemy import case, event, or_, select, update
from sqlalchemy.orm import Session, attributes

from app.config import OperatorConfig
from app.gate import MarkerKind, find_marker, spec_id
from app.github import GitHubNotConfigured, IssueIO, Services
from app.retry import WakeLoop, queue_delay
from app.store import Sessions, WorkItem, WorkItemStatus, aware, hooked, is_postgres
from app.workitems.decide.advance import walk_of
from app.workitems.flow.capacity import held_words, place_in_line
from app.workitems.spend.post_rate import THROTTLED_KEY
from app.workitems.spend.spending import budget_line_of, stopped_by_budget
from app.workitems.spend.usage import usage_line_of
from app.workitems.tell.progress_text import ProgressView, mirror_payload, render_progress
from app.workitems.tell.setup_notes import setup_words

log = logging.getLogger(__name__)

WINDOW = timedelta(seconds=2)  # at most one edit per item per window (the default)
LEASE = timedelta(seconds=60)  # a publisher that dies mid-post leaves the item due again
WATCHED = ("state", "phase", "gates", "artifacts", "session", "frozen", "pull_request")
_WATCH_KEY = "the-loop:progress-watch"  # the App's watch, in its sessions' `info`
_WAKE_FLAG = "the-loop:progress-wake"


def _now() -> datetime:
    return datetime.now(UTC)


class ProgressWatch:
    """One App's watch over its progress comments: every flush of a session the App opens
    marks the comments it changes due `window` later (a burst of changes becomes one edit),
    and `publish_soon` wakes the App's publishers when its transaction commits.

    Made when the App's state is built, hung on its `Sessions` (`watch`) and taken off in
    its shutdown (`unwatch`): a session the App did not open is left alone."""

    def __init__(self, window: timedelta = WINDOW) -> None:
        self.window = window
        self._wakes: list[threading.Event] = []
        self._guard = threading.Lock()

    def watch(self, sessions: Sessions) -> None:
        sessions.put(_WATCH_KEY, self)
        sessions.listen("before_flush", self._mark_changed)

    def unwatch(self, sessions: Sessions) -> None:
        sessions.forget("before_flush", self._mark_changed)
        sessions.drop(_WATCH_KEY)
        with self._guard:
            self._wakes.clear()

    def add_wake(self, wake: threading.Event) -> None:
        """Set `wake` whenever an item is made due at once (a publisher's wake-up)."""
        with self._guard:
            self._wakes.append(wake)

    def wake_publishers(self, _session: Session | None = None) -> None:
        with self._guard:
            wakes = list(self._wakes)
        for wake in wakes:
            wake.set()

    def _mark_changed(self, session: Session, _context: Any, _instances: Any) -> None:
        now = _now()
        for obj in list(session.dirty) + list(session.new):
            if not isinstance(obj, WorkItem) or obj.frozen is None:
                continue
            state = attributes.instance_state(obj)
            names = [n for n in WATCHED if n in state.attrs]
            if not any(state.attrs[n].history.has_changes() for n in names):
                continue
            obj.progress_rev = (obj.progress_rev or 0) + 1
            due = aware(obj.progress_due_at)
            # Always written, so a publisher's concurrent "clean" cannot hide this change.
            window = self.window
            obj.progress_due_at = min(due, now + window) if due is not None else now + window


USAGE_WINDOW = timedelta(seconds=10)  # a streaming session's usage edits the comment so often


def usage_changed(item: WorkItem, now: datetime) -> None:
    """New usage counts for `item`: its progress comment is due within `USAGE_WINDOW` (so a
    session reporting every few seconds edits it at most once per window)."""
    if item.frozen is None:
        return
    due = aware(item.progress_due_at)
    item.progress_rev = (item.progress_rev or 0) + 1
    item.progress_due_at = min(due, now + USAGE_WINDOW) if due is not None else now + USAGE_WINDOW


def publish_soon(session: Session, item: WorkItem) -> None:
    """Make `item`'s publishing pass (and what it owes: a confirmation) due now, and wake
    the App's publishers once `session` commits (a rollback leaves nothing due)."""
    item.progress_due_at = _now()
    watch: ProgressWatch | None = hooked(session, _WATCH_KEY)
    if watch is not None and _WAKE_FLAG not in session.info:
        session.info[_WAKE_FLAG] = True
        event.listen(session, "after_commit", watch.wake_publishers, once=True)


def view_of(
    item: WorkItem, config: OperatorConfig, usage: str = "", budget: str = ""
) -> ProgressView:
    """What the progress comment of `item` shows (pure apart from reading the row)."""
    frozen = item.frozen or {}
    session = item.session or {}
    trigger = config.routing.trigger
    return ProgressView(
        work_item_id=item.id,
        status=item.state,
        walk=walk_of(item),
        harness=str(session.get("harness") or frozen.get("harness") or ""),
        model=str(frozen.get("model") or ""),
        effort=str(frozen.get("effort") or ""),
        stall=str(session.get("stall") or ""),
        stall_hint=str(session.get("stall_hint") or ""),
        failure=str(session.get("failure") or "") if item.state == WorkItemStatus.EXITED else "",
        unsandboxed=session.get("sandbox") == "none",
        shared_network=session.get("sandbox") != "none" and session.get("network") == "host",
        setting_up=setup_words(session),
        queued=place_in_line(session) if item.state == WorkItemStatus.FROZEN else None,
        held=held_words(session) if item.state == WorkItemStatus.FROZEN else "",
        branch=item.branch or "",
        page=item.html_url or "",
        artifacts=list(item.artifacts or []),
        spec_id=spec_id(item.issue_number),
        pull_request=dict(getattr(item, "pull_request", None) or {}),
        approve_keyword=trigger.approve_keyword,
        changes_keyword=trigger.changes_keyword,
        usage=usage,
        budget=budget,
        budget_spent=stopped_by_budget(item),
        capped=stopped_by_budget(item) and bool((item.budget or {}).get("capped")),
        throttled=bool(session.get(THROTTLED_KEY)),
    )


def _post_confirmation(io: IssueIO, markdown: str) -> int:
    """Post an owed confirmation, or find the one a crashed pass posted (its marker, which
    the markdown ends with, names the item and the run)."""
    found = find_marker(markdown)
    attrs = dict(found.attrs) if found is not None else {}
    comment_id, _ = io.post_once(markdown, MarkerKind.CONFIRMATION, **attrs)
    return comment_id


class ProgressPublisher(WakeLoop):
    """Posts and edits progress comments of due items; one thread per App process."""

    thread_name = "progress-publisher"

    def __init__(
        self,
        services: Services,
        sessions: Sessions,
        watch: ProgressWatch,
        *,
        clock: Callable[[], datetime] = _now,
        poll: float = 0.5,
    ) -> None:
        self.services = services
        self.sessions = sessions
        self.watch = watch
        self.clock = clock
        super().__init__(poll)
        watch.add_wake(self.wake)

    def _claim(self) -> str | None:
        """Lease one due item nobody else's pass holds (every App process runs a publisher:
        two passes on one item would both find no comment and both post one)."""
        now = self.clock()
        free = or_(WorkItem.progress_leased_until.is_(None), WorkItem.progress_leased_until <= now)
        query = (
            select(WorkItem.id)
            .where(WorkItem.progress_due_at <= now, free)
            .order_by(WorkItem.progress_due_at)
            .limit(5)
        )
        if is_postgres(self.sessions.engine):
            query = query.with_for_update(skip_locked=True)
        with self.sessions() as session, session.begin():
            for work_item_id in session.scalars(query).all():
                taken = session.execute(
                    update(WorkItem)
                    .where(WorkItem.id == work_item_id, WorkItem.progress_due_at <= now, free)
                    .values(progress_leased_until=now + LEASE)
                    .execution_options(synchronize_session=False)
                )
                if taken.rowcount == 1:  # type: ignore[attr-defined]
                    return str(work_item_id)
        return None

    def run_once(self) -> bool:
        """Publish one due item; False when none was due."""
        work_item_id = self._claim()
        if work_item_id is None:
            return False
        try:
            self._publish(work_item_id)
        except (GitHubException, GitHubNotConfigured, OSError) as exc:
            self._failed(work_item_id, exc)
        return True

    def _publish(self, work_item_id: str) -> None:
        with self.sessions(expire_on_commit=False) as session:
            item = session.get(WorkItem, work_item_id)
            if item is None or item.installation_id is None:
                return
            revision = item.progress_rev
            usage = usage_line_of(session, item, self.services.config, self.clock())
            budget = budget_line_of(self.services, session, item)
            view = view_of(item, self.services.config, usage, budget)
            body = render_progress(view)
            comment_id = item.progress_comment_id
            owed = item.confirmation_owed
            mirrored = {
                **mirror_payload(view),
                "title": item.title,
                "repo": item.repo_full_name,
                "issue_number": item.issue_number,
            }
        io = IssueIO(
            self.services.github, item.installation_id, item.repo_full_name, item.issue_number
        )
        confirmed = _post_confirmation(io, owed) if owed is not None else None
        if comment_id is None or not io.edit(comment_id, body):
            comment_id, adopted = io.post_once(body, MarkerKind.PROGRESS, item=work_item_id)
            if adopted:  # an older one: bring it up to date (a new one already says it)
                io.edit(comment_id, body)
        now = self.clock()
        with self.sessions() as session, session.begin():
            session.execute(
                update(WorkItem)
                .where(WorkItem.id == work_item_id)
                .values(
                    progress_comment_id=comment_id,
                    progress_posted_rev=revision,
                    progress_attempts=0,
                    progress_leased_until=None,
                    progress_due_at=case(
                        (WorkItem.progress_rev > revision, now + self.watch.window),
                        else_=None,
                    ),
                )
                .execution_options(synchronize_session=False)
            )
            if confirmed is not None:  # unless a later execute owes another one meanwhile
                session.execute(
                    update(WorkItem)
                    .where(WorkItem.id == work_item_id, WorkItem.confirmation_owed == owed)
                    .values(confirmation_comment_id=confirmed, confirmation_owed=None)
                    .execution_options(synchronize_session=False)
                )
            self.services.mirror.post(
                session, work_item_id, "progress", {**mirrored, "url": item.html_url}
            )

    def _failed(self, work_item_id: str, exc: BaseException) -> None:
        log.warning("progress comment of %s failed: %s", work_item_id, exc)
        with self.sessions() as session, session.begin():
            item = session.get(WorkItem, work_item_id)
            if item is None:
                return
            attempts = item.progress_attempts + 1
            delay = timedelta(seconds=queue_delay(attempts, base=2.0))
            session.execute(
                update(WorkItem)
                .where(WorkItem.id == work_item_id)
                .values(
                    progress_attempts=attempts,
                    progress_due_at=self.clock() + delay,
                    progress_leased_until=None,
                )
                .execution_options(synchronize_session=False)
            )
        self.services.events.emit("progress.failed", work_item_id, error=str(exc)[:500])

    def drain(self) -> int:
        count = 0
        while self.run_once():
            count += 1
        return count
