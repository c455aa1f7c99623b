"""The App's tables. The database is the authority on work items, jobs and deliveries."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, overload

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from zstandard import ZstdCompressor, ZstdDecompressor

from app.protocol import USAGE_FIELDS

# How a stored body starts: a Zstandard frame's magic number, or the first byte of a zlib
# stream (rows stored before bodies were kept as Zstandard). No JSON text starts with either.
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_ZLIB_HEADER = b"\x78"
_codecs = threading.local()  # a (de)compressor serves one thread at a time


def utcnow() -> datetime:
    return datetime.now(UTC)


@overload
def aware(moment: datetime) -> datetime: ...
@overload
def aware(moment: None) -> None: ...
@overload
def aware(moment: datetime | None) -> datetime | None: ...
def aware(moment: datetime | None) -> datetime | None:
    """A time read back from the store, in UTC: SQLite hands back naive datetimes for what
    was stored as UTC, PostgreSQL aware ones."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def driver_time(dialect: Dialect) -> Callable[[datetime], Any]:
    """How `dialect`'s driver takes a time for a DateTime column of the models, for the
    statements written as driver SQL (the ingest writer's, the inbox worker's): the models'
    own bind processor (SQLite stores text), so what they store and compare is what the
    models read back."""
    processor = DateTime(timezone=True).dialect_impl(dialect).bind_processor(dialect)
    return processor if processor is not None else _as_is


def _as_is(value: datetime) -> datetime:
    return value


def compress_body(body: bytes) -> bytes:
    """A JSON webhook body as stored: Zstandard level 1, about a seventh of GitHub's verbose
    JSON. It runs on the acknowledgement path, where it is well ahead of zlib
    (`bench/ingest.py`). Already-compressed input comes back unchanged, so callers may
    compress early."""
    if body.startswith((_ZSTD_MAGIC, _ZLIB_HEADER)):
        return body
    compressor = getattr(_codecs, "compressor", None)
    if compressor is None:
        compressor = _codecs.compressor = ZstdCompressor(level=1)
    return compressor.compress(body)


def decompress_body(stored: bytes) -> bytes:
    """The JSON body back from `compress_body`; an older zlib row or an uncompressed one reads
    back too."""
    if stored.startswith(_ZSTD_MAGIC):
        decompressor = getattr(_codecs, "decompressor", None)
        if decompressor is None:
            decompressor = _codecs.decompressor = ZstdDecompressor()
        return decompressor.decompress(stored)
    if stored.startswith(_ZLIB_HEADER):
        return zlib.decompress(stored)
    return stored


class CompressedBody(TypeDecorator[bytes]):
    """A JSON body kept compressed: less for every delivery to write, checkpoint and keep."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: bytes | None, dialect: Dialect) -> bytes | None:
        return None if value is None else compress_body(value)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> bytes | None:
        return None if value is None else decompress_body(value)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Origin(StrEnum):
    """How a delivery reached the inbox: POSTed by GitHub, or read from the App's delivery
    log (`app.github.reconcile`)."""

    PUSHED = "pushed"
    PULLED = "pulled"


class InboxState(StrEnum):
    QUEUED = "queued"
    DONE = "done"
    PARKED = "parked"  # kept failing; visible, never dropped


class JobState(StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    DONE = "done"
    FAILED = "failed"


class WorkItemStatus(StrEnum):
    """A work item's lifecycle; the README draws the transitions."""

    PARKED = "parked"  # checklist posted, waiting at the human start gate
    UNLABELED = "unlabeled"  # label removed before execute: no spawn until re-labelled
    FROZEN = "frozen"  # selection frozen, spawn job queued
    SPAWNING = "spawning"  # a spawner claimed the spawn job
    RUNNING = "running"  # session live in tmux
    STALLED = "stalled"  # session waits on an interactive prompt
    LOST = "lost"  # its spawner went silent: nobody watches the session; a person decides
    EXITED = "exited"  # session process ended
    STOPPED = "stopped"  # stopped because the issue closed
    CLOSED = "closed"  # issue closed before any session
    DONE = "done"  # walked to `complete` (or its pull request merged)
    PR_CLOSED = "pr-closed"  # its pull request closed unmerged: waits for a reopen or an execute


class JobKind(StrEnum):
    SPAWN = "spawn"
    DELIVER = "deliver"
    STOP = "stop"
    ANSWER = "answer"
    ALLOW = "allow"


class Delivery(Base):
    """One GitHub webhook delivery, stored before it is acknowledged."""

    __tablename__ = "inbox"
    # A claim asks for the queued row of the earliest turn (lanes.py), oldest first: (state,
    # turn, id) answers it from the index, however many done rows lie before it.
    __table_args__ = (Index("ix_inbox_state_turn", "state", "turn", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(String(64), unique=True)
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    body: Mapped[bytes] = mapped_column(CompressedBody)
    # SHA-256 of the body as received: a signed body is stored once, whatever its id says.
    body_sha256: Mapped[str | None] = mapped_column(String(64), unique=True, index=True)
    state: Mapped[str] = mapped_column(String(16), default=InboxState.QUEUED)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    claimed_by: Mapped[str | None] = mapped_column(String(128))
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_error: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When its lane's fair share lets it be handled, in ms since the epoch (lanes.py).
    turn: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    origin: Mapped[str] = mapped_column(
        String(8), default=Origin.PUSHED, server_default=Origin.PUSHED.value
    )


class DeliveryLogState(Base):
    """The App's reading of GitHub's delivery log (`app.github.reconcile`), one row: who
    holds the lease to read it, how far back it has been read, the requests spent on it in
    the current hour, until when GitHub asked it to wait, and the last pass's counts."""

    __tablename__ = "delivery_log"
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The newest log entry below which every entry is in the inbox (or was not for it).
    seen_id: Mapped[int | None] = mapped_column(BigInteger)
    window_start: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    window_requests: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    refusals: Mapped[int] = mapped_column(Integer, default=0)  # rate-limit answers in a row
    last_pass: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Event(Base):
    """An append-only audit line; mirrors `events.jsonl`."""

    __tablename__ = "events"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ts: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    event: Mapped[str] = mapped_column(String(64), index=True)
    work_item_id: Mapped[str | None] = mapped_column(String(256), index=True)
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Installation(Base):
    __tablename__ = "installations"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    account_login: Mapped[str] = mapped_column(String(256))
    account_type: Mapped[str | None] = mapped_column(String(32))
    repository_selection: Mapped[str | None] = mapped_column(String(16))
    suspended: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Repository(Base):
    __tablename__ = "repositories"
    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    installation_id: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("installations.id", ondelete="CASCADE"), index=True
    )
    full_name: Mapped[str] = mapped_column(String(256), index=True)
    private: Mapped[bool] = mapped_column(default=False)


class WorkItem(Base):
    """A labelled issue and everything decided about it."""

    __tablename__ = "work_items"
    id: Mapped[str] = mapped_column(String(256), primary_key=True)  # github:owner/repo#n
    repo_full_name: Mapped[str] = mapped_column(String(256), index=True)
    issue_number: Mapped[int] = mapped_column(Integer)
    installation_id: Mapped[int | None] = mapped_column(BigInteger)
    title: Mapped[str] = mapped_column(Text, default="")
    html_url: Mapped[str] = mapped_column(Text, default="")
    clone_url: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(32), index=True)
    checklist_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    confirmation_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    # The confirmation an execute owes the issue (its markdown, marker last) until the
    # progress publisher has posted it: the spawn job commits without waiting for GitHub.
    confirmation_owed: Mapped[str | None] = mapped_column(Text)
    frozen: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The issue text the checklist was posted for: title, body, its hash, when it was read.
    pinned: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    session: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    slack_ts: Mapped[str | None] = mapped_column(String(64))
    # Where the item stands in the process graph (the App's record is the authority), the
    # human decisions taken at later gates, and the artifacts the session last reported.
    phase: Mapped[str | None] = mapped_column(String(64))
    gates: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    artifacts: Mapped[list[Any] | None] = mapped_column(JSON)
    # The one progress comment, and when it must next be rendered (None: up to date).
    progress_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    # Every change that the comment shows bumps `progress_rev`; the publisher records the
    # revision it rendered, so a change made while it was posting is never lost.
    progress_rev: Mapped[int] = mapped_column(Integer, default=0)
    progress_posted_rev: Mapped[int] = mapped_column(Integer, default=0)
    progress_due_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), index=True)
    progress_attempts: Mapped[int] = mapped_column(Integer, default=0)
    # Until when one publisher's pass holds the comment (None: nobody): kept apart from
    # `progress_due_at`, which every change brings forward, so a change cannot hand the
    # comment to a second publisher while the first is still posting.
    progress_leased_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The branch the session works on (recorded at execute, or a labelled PR's head), the
    # pull request it is linked to ({number, html_url, head, base, head_sha, merged, closed,
    # by}) and that PR's number again, indexed, so PR events find their item.
    branch: Mapped[str | None] = mapped_column(String(256))
    pull_request: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    pull_number: Mapped[int | None] = mapped_column(Integer, index=True)
    # The budget's run (workitems/spend/spending.py): where its counts start, what was added on the
    # issue and by whom, whether the session was warned and whether it ran out.
    budget: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class Job(Base):
    """Work for a spawner: spawn, deliver or stop a session. `key` makes queuing idempotent."""

    __tablename__ = "jobs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    key: Mapped[str] = mapped_column(String(256), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    work_item_id: Mapped[str] = mapped_column(String(256), index=True)
    repo_full_name: Mapped[str] = mapped_column(String(256), index=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default=JobState.QUEUED, index=True)
    spawner_id: Mapped[int | None] = mapped_column(Integer)
    # deliver/stop jobs go to the spawner hosting the item's session (None: any server of repo)
    target_spawner_id: Mapped[int | None] = mapped_column(Integer)
    harness: Mapped[str | None] = mapped_column(String(64))  # a spawn's frozen harness
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The installation token the current claim's spawner asked for to clone, kept only until
    # it is revoked (the job finished, failed, was offered again, or a new one replaced it).
    github_token: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class Spawner(Base):
    """A devbox agent; its token is stored only as a hash."""

    __tablename__ = "spawners"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    repositories: Mapped[list[Any]] = mapped_column(JSON, default=list)  # the token allows
    serves: Mapped[list[Any] | None] = mapped_column(JSON)  # registered (within the allowance)
    harnesses: Mapped[list[Any]] = mapped_column(JSON, default=list)
    version: Mapped[str | None] = mapped_column(String(64))
    last_seen: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SessionToken(Base):
    """A credential a session uses to reach the App about its own work item (comments, phase
    moves, its pull request, git through the App's gateway); stored only as a hash. `job_id`
    is the job it was handed out with: the session that job starts is the one it belongs to."""

    __tablename__ = "session_tokens"
    token_hash: Mapped[str] = mapped_column(String(128), primary_key=True)
    work_item_id: Mapped[str] = mapped_column(String(256), index=True)
    job_id: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class WorkItemUsage(Base):
    """What a work item's sessions used of the model, as the spawners' gateways counted it:
    token counts by kind, the number of model requests and of the tool calls they asked for,
    summed over every session."""

    __tablename__ = "work_item_usage"
    work_item_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    output_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_read_input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    cache_creation_input_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    requests: Mapped[int] = mapped_column(BigInteger, default=0)
    tool_calls: Mapped[int] = mapped_column(BigInteger, default=0)  # tool_use blocks answered
    active_ms: Mapped[int] = mapped_column(BigInteger, default=0)  # the harness at work

    def counts(self) -> dict[str, int]:
        """Every count of the row by its name."""
        return {name: int(getattr(self, name) or 0) for name in USAGE_FIELDS}

    updated_at: Mapped[datetime] = mapped_column(
        DateTime(timezone=True), default=utcnow, onupdate=utcnow
    )


class SpendDay(Base):
    """What every work item of one repository spent of the model on one UTC day (tokens, and
    dollars in millionths at each item's model price), the ledger the daily and monthly
    spend caps read; and who lifted the caps for that repository on that day."""

    __tablename__ = "spend_days"
    installation_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # 0: none
    repo_full_name: Mapped[str] = mapped_column(String(256), primary_key=True)  # lower case
    day: Mapped[str] = mapped_column(String(10), primary_key=True)  # 2026-12-06
    tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    usd_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    lifted_by: Mapped[str | None] = mapped_column(String(256), nullable=True)
    lifted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ModelVerdict(Base):
    """What `the-loop models check` found for a checklist row (`model-opus`, `effort-max`):
    `ok`, `refused` or `unknown`. The gate hides `refused` rows."""

    __tablename__ = "model_verdicts"
    token: Mapped[str] = mapped_column(String(128), primary_key=True)
    verdict: Mapped[str] = mapped_column(String(16))
    harness: Mapped[str] = mapped_column(String(64), default="")
    detail: Mapped[str] = mapped_column(Text, default="")
    probed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Once(Base):
    """A side effect done once per key (a reply, a reaction): makes handlers idempotent."""

    __tablename__ = "once"
    key: Mapped[str] = mapped_column(String(256), primary_key=True)
    ref: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SlackOutbox(Base):
    """A Slack message waiting to be sent; retried with backoff, never dropped."""

    __tablename__ = "slack_outbox"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    work_item_id: Mapped[str] = mapped_column(String(256), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(16), default="queued", index=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
