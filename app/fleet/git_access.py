"""Push credentials for a session: what `the-loop git-credential` asks the App for.

A session holds no GitHub credential. When its git needs one, the checkout's credential
helper asks the App with the session token; the App mints an installation token scoped to
the item's one repository with `contents: write` (GitHub's fixed lifetime: an hour at
most), but only while the item's session is live, and only for the item's own repository
URL — a request for any other host or path is refused, so the token can never be handed to
a remote the agent chose. The token is returned once, never stored, logged or recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from githubkit_schemas.latest.types import AppPermissionsType
from sqlalchemy.orm import Session

from app.fleet.tokens import Principal
from app.services import Services
from app.store.tables import WorkItem, WorkItemStatus

S = WorkItemStatus
# A session is running (or being started) only in these; an exited, stopped, closed or
# finished item's session is dead, and a dead session gets no credential.
LIVE_SESSION = frozenset({S.SPAWNING, S.RUNNING, S.STALLED})
PUSH_PERMISSIONS: AppPermissionsType = {"contents": "write"}
USERNAME = "x-access-token"


class CredentialRefused(Exception):
    """No credential: `status` is the HTTP status, the message what git's user is told."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class CredentialRequest:
    """What git asked its helper for: the work item, and the URL it wants to reach."""

    work_item: str
    protocol: str
    host: str
    path: str


def parse_request(data: Any) -> CredentialRequest:
    """Validate a `/spawner/v1/git-credential` body (pure); raises CredentialRefused(400)."""
    if not isinstance(data, dict):
        raise CredentialRefused(400, "the body must be a JSON object")
    fields = {key: data.get(key) for key in ("work_item", "protocol", "host", "path")}
    if not all(isinstance(value, str) for value in fields.values()) or not fields["work_item"]:
        raise CredentialRefused(400, "`work_item`, `protocol`, `host` and `path` are required")
    return CredentialRequest(**{key: str(value) for key, value in fields.items()})


def _repository_path(path: str) -> str:
    path = path.strip("/").lower()
    return path[: -len(".git")] if path.endswith(".git") else path


def same_repository(clone_url: str, protocol: str, host: str, path: str) -> bool:
    """Whether git's request names the repository at `clone_url` (pure): same scheme, same
    host and port, same path (`.git` and slashes aside; GitHub's names are case-blind)."""
    parts = urlsplit(clone_url)
    if parts.scheme not in ("http", "https") or protocol.lower() != parts.scheme:
        return False
    if host.lower() != parts.netloc.rsplit("@", 1)[-1].lower():
        return False
    return bool(path) and _repository_path(path) == _repository_path(parts.path)


def check(principal: Principal, item: WorkItem, request: CredentialRequest) -> None:
    """Raise CredentialRefused unless `principal` is the live session of `item` asking for
    `item`'s own repository."""
    if principal.work_item is None:
        raise CredentialRefused(403, "only a session's own token may ask for a push credential")
    if not principal.may_act_on(item.id, item.repo_full_name):
        raise CredentialRefused(403, f"this session token is not {item.id}'s")
    if item.state not in LIVE_SESSION:
        raise CredentialRefused(409, f"{item.id} has no live session (it is {item.state})")
    if not request.path:
        raise CredentialRefused(
            403, "git did not say which repository (set credential.useHttpPath in the checkout)"
        )
    if not same_repository(item.clone_url, request.protocol, request.host, request.path):
        raise CredentialRefused(
            403,
            f"credentials are given only for {item.repo_full_name} ({item.clone_url}), not "
            f"{request.protocol}://{request.host}/{request.path.strip('/')}",
        )
    if item.installation_id is None:
        raise CredentialRefused(409, f"{item.id} has no installation to mint a token with")


def grant(
    services: Services, session: Session, principal: Principal, item: WorkItem, request: Any
) -> dict[str, str]:
    """A push credential for the item's repository (raises CredentialRefused); records that
    one was given, never what it was."""
    check(principal, item, request)
    assert item.installation_id is not None
    name = item.repo_full_name.split("/", 1)[1]
    minted = services.github.repository_token(item.installation_id, name, PUSH_PERMISSIONS)
    expires = minted.expires_at.isoformat()
    services.events.emit(
        "git.credential_issued",
        item.id,
        session=session,
        host=request.host,
        path=request.path,
        permissions=PUSH_PERMISSIONS,
        expires_at=expires,
    )
    return {"username": USERNAME, "password": minted.token, "expires_at": expires}
