"""Credentials for spawners and sessions, and which repositories a spawner serves.

A spawner token is shown once, when it is created, and stored only as its SHA-256 hash, so a
copy of the database cannot be used to claim jobs. A session token is a narrower credential
minted per work item for the agent's `the-loop comment` / `ask` / `phase` / `pr` and its git
(through the App's git gateway): it acts on that one item and nothing else. It expires
`SESSION_TOKEN_TTL` after it was minted or last renewed; the App renews an item's tokens
while its session is live (each job handed out for it, each event its spawner reports about
it, and every minute its spawner polls).

A session has one live token: each token names the job it was handed out with, and once the
App knows which session runs — a spawn reported, a follow-up that relaunched it — every other
token of the item is withdrawn, as are the token of a follow-up delivered to the session
already running and every token of a session that exited or was stopped.

Repository scopes are lists of `owner/repo` names, or `["*"]` for every repository the App
is installed on; names compare case-insensitively, as GitHub's do.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.config import NAME_RE
from app.fleet.fleet_errors import FleetError
from app.store import SessionToken, Spawner, WorkItem, WorkItemStatus, aware

SPAWNER_PREFIX = "tlsp_"
SESSION_PREFIX = "tlss_"
ANY_REPOSITORY = "*"
SESSION_TOKEN_TTL = timedelta(hours=2)
REPO_RE = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
# An item whose issue closed has no session left: its session tokens authenticate nothing.
ENDED = frozenset({WorkItemStatus.STOPPED, WorkItemStatus.CLOSED})


class TokenError(FleetError, ValueError):
    """A name or repository scope cannot be used; the message says which."""


def hash_token(token: str) -> str:
    """The stored form of a token (hex SHA-256)."""
    return hashlib.sha256(token.encode()).hexdigest()


def normalize_repositories(repositories: Iterable[str]) -> list[str]:
    """Validated, lower-cased, de-duplicated scope; `*` alone stands for every repository."""
    names: list[str] = []
    for raw in repositories:
        name = str(raw).strip()
        if name == ANY_REPOSITORY:
            return [ANY_REPOSITORY]
        if not REPO_RE.match(name):
            raise TokenError(f"{name!r} is not a repository name of the form owner/repo")
        if name.lower() not in names:
            names.append(name.lower())
    return names


def narrow(requested: Sequence[str], allowed: Sequence[str]) -> list[str]:
    """What a spawner may serve: the repositories it asked for, within what its token allows.

    An empty request means "everything the token allows"; a request outside the allowance is
    dropped rather than granted (fail toward the narrower scope).
    """
    asked = normalize_repositories(requested) if requested else list(allowed)
    if ANY_REPOSITORY in allowed:
        return asked
    if ANY_REPOSITORY in asked:
        return list(allowed)
    permitted = {name.lower() for name in allowed}
    return [name for name in asked if name in permitted]


def serves(scope: Sequence[str], repo_full_name: str) -> bool:
    """True when a repository scope covers `repo_full_name`."""
    return ANY_REPOSITORY in scope or repo_full_name.lower() in {s.lower() for s in scope}


def scope_of(spawner: Spawner) -> list[str]:
    """The repositories a spawner serves now: what it registered, else what its token allows."""
    return list(spawner.serves if spawner.serves is not None else spawner.repositories)


def create_token(session: Session, name: str, repositories: Sequence[str]) -> str:
    """Create a spawner allowed to serve `repositories` (default: all); return its token once.

    Only the hash is stored; the caller prints the returned plaintext and forgets it.
    """
    if not NAME_RE.match(name):
        raise TokenError(f"{name!r} is not a valid spawner name (letters, digits, '.', '_', '-')")
    scope = normalize_repositories(repositories) if repositories else [ANY_REPOSITORY]
    token = SPAWNER_PREFIX + secrets.token_urlsafe(32)
    session.add(Spawner(name=name, token_hash=hash_token(token), repositories=scope, harnesses=[]))
    session.flush()
    return token


def revoke_spawner(session: Session, name: str) -> int:
    """Withdraw the credentials of every spawner called `name`; returns how many.

    A job such a spawner held is offered again when its lease runs out.
    """
    result = session.execute(delete(Spawner).where(Spawner.name == name))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def mint_session_token(
    session: Session, work_item_id: str, now: datetime, job_id: int | None = None
) -> str:
    """A new credential that lets a session act on `work_item_id` only, until it expires;
    `job_id` is the job it goes out with (a token of an earlier claim of it is withdrawn)."""
    if job_id is not None:
        drop_job_token(session, job_id)
    token = SESSION_PREFIX + secrets.token_urlsafe(32)
    expires = now + SESSION_TOKEN_TTL
    session.add(
        SessionToken(
            token_hash=hash_token(token),
            work_item_id=work_item_id,
            expires_at=expires,
            job_id=job_id,
        )
    )
    return token


def drop_job_token(session: Session, job_id: int) -> int:
    """Withdraw the token handed out with `job_id` (its session never started, or a session
    already running took the job); returns how many."""
    result = session.execute(delete(SessionToken).where(SessionToken.job_id == job_id))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def keep_job_token(session: Session, work_item_id: str, job_id: int) -> int:
    """The session `job_id` started is the item's one session: withdraw every other token."""
    result = session.execute(
        delete(SessionToken).where(
            SessionToken.work_item_id == work_item_id,
            (SessionToken.job_id != job_id) | SessionToken.job_id.is_(None),
        )
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def renew_session_tokens(session: Session, work_items: Sequence[str], now: datetime) -> None:
    """Push back the expiry of the live session tokens of `work_items` (their sessions are
    live); an expired token stays expired."""
    if not work_items:
        return
    session.execute(
        update(SessionToken)
        .where(SessionToken.work_item_id.in_(list(work_items)), SessionToken.expires_at > now)
        .values(expires_at=now + SESSION_TOKEN_TTL)
        .execution_options(synchronize_session=False)
    )


def hosted_items(session: Session, spawner: Spawner) -> list[str]:
    """The work items whose session `spawner` reported it runs, and runs now."""
    running = (WorkItemStatus.RUNNING, WorkItemStatus.STALLED)
    rows = session.execute(select(WorkItem.id, WorkItem.session).where(WorkItem.state.in_(running)))
    return [
        item
        for item, facts in rows
        if isinstance(facts, dict) and facts.get("spawner_id") == spawner.id
    ]


def revoke_session_tokens(session: Session, work_item_id: str, sparing: Sequence[int] = ()) -> int:
    """Withdraw every session credential of `work_item_id` (its session ended) but those handed
    out with the jobs in `sparing` (claimed now: the session they start is yet to come)."""
    query = delete(SessionToken).where(SessionToken.work_item_id == work_item_id)
    if sparing:
        spared = SessionToken.job_id.in_(list(sparing))
        query = query.where(~spared | SessionToken.job_id.is_(None))
    result = session.execute(query)
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Principal:
    """Who is calling the spawner API: a spawner, or one work item's session."""

    spawner: Spawner | None = None
    work_item_id: str | None = None

    def may_act_on(self, work_item_id: str, repo_full_name: str) -> bool:
        """Spawners act on the repositories they serve; a session only on its own item."""
        if self.spawner is not None:
            return serves(scope_of(self.spawner), repo_full_name)
        return self.work_item_id is not None and hmac.compare_digest(
            self.work_item_id, work_item_id
        )


def authenticate(session: Session, authorization: str | None, now: datetime) -> Principal | None:
    """The principal behind an `Authorization: Bearer …` header, or None (also for a session
    token that has expired).

    The lookup is by hash, so the comparison never touches a plaintext secret.
    """
    if not authorization or not authorization.startswith("Bearer "):
        return None
    token = authorization[len("Bearer ") :].strip()
    if token.startswith(SPAWNER_PREFIX):
        query = select(Spawner).where(Spawner.token_hash == hash_token(token))
        spawner = session.scalars(query).first()
        return Principal(spawner=spawner) if spawner is not None else None
    if token.startswith(SESSION_PREFIX):
        row = session.get(SessionToken, hash_token(token))
        if row is None or aware(row.expires_at) <= now:
            return None
        item = session.get(WorkItem, row.work_item_id)
        if item is not None and item.state in ENDED:
            return None  # the issue closed: its session's token dies with it, at once
        return Principal(work_item_id=row.work_item_id)
    return None


def register(
    session: Session,
    spawner: Spawner,
    repositories: Sequence[str],
    harnesses: Sequence[str],
    version: str | None,
    now: datetime,
) -> list[str]:
    """Record what a spawner serves and hosts; returns the repositories it was granted."""
    for harness in harnesses:
        if not isinstance(harness, str) or not NAME_RE.match(harness):
            raise TokenError(f"{harness!r} is not a valid harness name")
    spawner.serves = narrow(list(repositories), list(spawner.repositories))
    spawner.harnesses = list(dict.fromkeys(harnesses))
    spawner.version = (version or "")[:64] or None
    spawner.last_seen = now
    return list(spawner.serves)


def hosted_harnesses(session: Session, repo_full_name: str | None = None) -> set[str]:
    """Harnesses some registered spawner reported (serving `repo_full_name`, when given)."""
    hosts: set[str] = set()
    for spawner in session.scalars(select(Spawner)):
        if spawner.serves is None:  # created but never registered: hosts nothing yet
            continue
        if repo_full_name is None or serves(spawner.serves, repo_full_name):
            hosts.update(str(h) for h in spawner.harnesses or [])
    return hosts
