"""The one row that says who reads GitHub's delivery log and how far it has been read.

Every replica runs the reader; the lease makes one read at a time. Taking it is one UPDATE
that succeeds only where the row is free, expired or already the caller's: on PostgreSQL
a second replica's UPDATE waits for the first's row lock and then finds the lease taken; on
SQLite the file's write lock orders them the same way. The holder renews it while a pass
runs and writes its outcome (`finish`) only while it still holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.store.tables import DeliveryLogState, aware

NAME = "github"


@dataclass(frozen=True)
class LogState:
    """What a pass starts from."""

    seen_id: int | None = None
    window_start: datetime | None = None
    window_requests: int = 0
    not_before: datetime | None = None
    refusals: int = 0
    last_pass: dict[str, Any] | None = None


def _state(row: DeliveryLogState) -> LogState:
    return LogState(
        seen_id=row.seen_id,
        window_start=aware(row.window_start),
        window_requests=row.window_requests or 0,
        not_before=aware(row.not_before),
        refusals=row.refusals or 0,
        last_pass=row.last_pass,
    )


def _ensure_row(engine: Engine) -> None:
    with Session(engine) as session:
        if session.get(DeliveryLogState, NAME) is not None:
            return
        session.add(DeliveryLogState(name=NAME, window_requests=0, refusals=0))
        try:
            session.commit()
        except IntegrityError:  # another replica inserted it first
            session.rollback()


def _claim(engine: Engine, holder: str, now: datetime, ttl: timedelta, mine_only: bool) -> bool:
    free = or_(
        DeliveryLogState.holder == holder,
        DeliveryLogState.lease_until.is_(None),
        DeliveryLogState.lease_until < now,
    )
    condition = DeliveryLogState.holder == holder if mine_only else free
    with Session(engine) as session, session.begin():
        result = session.execute(
            update(DeliveryLogState)
            .where(DeliveryLogState.name == NAME, condition)
            .values(holder=holder, lease_until=now + ttl)
        )
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def take(engine: Engine, holder: str, now: datetime, ttl: timedelta) -> LogState | None:
    """The lease for `holder` until `now + ttl` and the state to start from; None while
    another holder's lease runs."""
    _ensure_row(engine)
    if not _claim(engine, holder, now, ttl, mine_only=False):
        return None
    with Session(engine) as session:
        row = session.get(DeliveryLogState, NAME)
        return _state(row) if row is not None else None


def renew(engine: Engine, holder: str, now: datetime, ttl: timedelta) -> bool:
    """Extend `holder`'s lease; False when it is no longer theirs."""
    return _claim(engine, holder, now, ttl, mine_only=True)


def finish(engine: Engine, holder: str, state: LogState, lease_until: datetime) -> bool:
    """Record a pass's outcome, while `holder` still holds the lease; it keeps the lease
    until `lease_until` (now, to let it go)."""
    with Session(engine) as session, session.begin():
        result = session.execute(
            update(DeliveryLogState)
            .where(DeliveryLogState.name == NAME, DeliveryLogState.holder == holder)
            .values(
                lease_until=lease_until,
                seen_id=state.seen_id,
                window_start=state.window_start,
                window_requests=state.window_requests,
                not_before=state.not_before,
                refusals=state.refusals,
                last_pass=state.last_pass,
            )
        )
        return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def release(engine: Engine, holder: str) -> None:
    """Let the lease go now (a replica stopping), if it is `holder`'s."""
    with Session(engine) as session, session.begin():
        session.execute(
            update(DeliveryLogState)
            .where(DeliveryLogState.name == NAME, DeliveryLogState.holder == holder)
            .values(lease_until=None)
        )


def current(engine: Engine) -> LogState | None:
    """The row as it stands (the status page's last pass); None before the first pass."""
    with Session(engine) as session:
        row = session.scalars(select(DeliveryLogState).where(DeliveryLogState.name == NAME)).first()
        return _state(row) if row is not None else None
