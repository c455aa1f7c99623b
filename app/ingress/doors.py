"""What each door of the App asks before it reads a request's body, and how much it reads.

A request's body is read only after its credential is checked and only up to its door's
limit: the spawner API wants a known bearer token, Slack wants its signature headers with
a fresh timestamp (the signature itself covers the body, so Bolt checks it after), and
every other path (`/healthz`, `/status`) has no use for a body at all. The webhook path has
its own rules (`app.github.webhooks`). The git gateway (`/git/…`) wants a live session token
as git sends it (the password of HTTP basic auth) and streams its bodies, up to a larger
limit, rather than reading them first. Pure: the caller looks tokens up and reads bodies.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from app.ingress.ingress_errors import IngressError

SPAWNER_PATH = "/spawner/v1"
SLACK_PATH = "/slack/events"
GIT_PATH = "/git"
SPAWNER_MAX_BODY = 1024 * 1024
# A push carries a pack: far larger than any API call, still bounded.
GIT_MAX_BODY = 256 * 1024 * 1024
# A git body streams through; it must have arrived whole within this many seconds.
GIT_BODY_SECONDS = 600.0
SLACK_MAX_BODY = 1024 * 1024
OTHER_MAX_BODY = 64 * 1024
# Slack refuses requests whose timestamp is further than this from now (replay window).
SLACK_SKEW_SECONDS = 300
# Every request header a door reads, by lower-case name.
HEADERS = frozenset(
    {
        "authorization",
        "content-length",
        "x-slack-signature",
        "x-slack-request-timestamp",
    }
)


# The ASGI scope key the front sets on a request whose bearer token it looked up and found
# live: the Flask door behind it (`app.fleet.api_guard`) need not look it up again. Only the server
# writes scope keys; a client's headers reach Flask as `HTTP_*` entries, never as this.
ADMITTED = "the-loop.admitted"


class Credential(StrEnum):
    NONE = "none"
    BEARER = "bearer"  # a spawner or session token, looked up by the caller
    SLACK = "slack"  # Slack's signature headers
    SESSION_BASIC = "session-basic"  # a session token as basic auth's password (git)


@dataclass(frozen=True)
class Door:
    credential: Credential
    max_body: int
    streamed: bool = False  # the body goes through as it arrives, never held whole


def door_for(path: str) -> Door:
    """The door a (non-webhook) path comes in by."""
    if path == SPAWNER_PATH or path.startswith(SPAWNER_PATH + "/"):
        return Door(Credential.BEARER, SPAWNER_MAX_BODY)
    if path == SLACK_PATH:
        return Door(Credential.SLACK, SLACK_MAX_BODY)
    if path.startswith(GIT_PATH + "/"):
        return Door(Credential.SESSION_BASIC, GIT_MAX_BODY, streamed=True)
    return Door(Credential.NONE, OTHER_MAX_BODY)


@dataclass(frozen=True)
class Refusal:
    """Why a request is answered before its body is read: status, message, counted reason."""

    status: int
    error: str
    reason: str
    headers: tuple[tuple[str, str], ...] = ()  # sent with the answer, e.g. Retry-After


def declared_length(headers: Mapping[str, str], door: Door) -> int | Refusal:
    """The Content-Length, or the refusal of a bad or too large one."""
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        return Refusal(400, "bad Content-Length", "bad-length")
    if length < 0:
        return Refusal(400, "bad Content-Length", "bad-length")
    if length > door.max_body:
        return too_large(door)
    return length


def too_large(door: Door) -> Refusal:
    return Refusal(413, f"the body may be at most {door.max_body} bytes", "too-large")


TOO_SLOW = Refusal(408, "the body did not arrive in time", "too-slow")


def busy(retry_after: int) -> Refusal:
    """Too many strangers' bodies are in flight to read this one (`app.ingress.budget`)."""
    retry = (("Retry-After", str(retry_after)),)
    return Refusal(503, "too many bodies in flight; retry later", "busy", retry)


def vouched(door: Door) -> bool:
    """Whether the door's credential is checked before the body is read (a bearer token):
    only then is the body not a stranger's."""
    return door.credential is Credential.BEARER


NO_TOKEN = Refusal(401, "a valid token is required (Authorization: Bearer …)", "bad-token")


# git asks its credential helper only after a 401 that names basic auth.
NO_SESSION = Refusal(
    401,
    "a live session token is required (git's credential helper gives it)",
    "bad-session-token",
    (("WWW-Authenticate", 'Basic realm="the-loop git"'),),
)


def git_busy(retry_after: int) -> Refusal:
    """A session token already has its share of the git gateway's requests in flight, or the
    process has as many as it serves at once (`app.ingress.slots`)."""
    retry = (("Retry-After", str(retry_after)),)
    return Refusal(503, "too many git requests in flight; retry later", "git-busy", retry)


class BodyCut(IngressError):
    """A streamed body went past its door's limit or deadline, or went quiet for too long;
    the message says which, `status` is the answer's."""

    def __init__(self, message: str, status: int = 413) -> None:
        super().__init__(message)
        self.status = status


class BodyClock:
    """When a streamed body's next byte must have come: `seconds` after the start for the
    whole body, `idle` after the last chunk. Both fronts ask it how long a read may wait
    (`wait`) and what to answer once a wait ran out (`cut`)."""

    def __init__(
        self, seconds: float, idle: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle = idle
        self.clock = clock
        self.due = clock() + seconds

    def wait(self) -> float:
        """Seconds the next read may wait (never below 0)."""
        return max(min(self.due - self.clock(), self.idle), 0.0)

    def left(self) -> float:
        """Seconds until the whole body must have come (below 0: it is late)."""
        return self.due - self.clock()

    def cut(self) -> BodyCut:
        """The refusal for a read that waited `wait()` in vain: the whole body's deadline
        or the idle gap, whichever ran out."""
        if self.due - self.clock() <= self.idle:
            return BodyCut("the body did not arrive in time", 408)
        return BodyCut(f"no byte of the body came for {self.idle:g} seconds", 408)


def basic_password(headers: Mapping[str, str]) -> str | None:
    """The password of an `Authorization: Basic …` header, else None."""
    value = headers.get("authorization", "")
    if not value.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(value[len("Basic ") :].strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    _user, sep, password = decoded.partition(":")
    return password if sep and password else None


def bearer(headers: Mapping[str, str]) -> str | None:
    """The `Authorization: Bearer …` header when there is one, else None."""
    value = headers.get("authorization", "")
    return value if value.startswith("Bearer ") and len(value) > len("Bearer ") else None


def slack_headers_problem(headers: Mapping[str, str], now: float) -> Refusal | None:
    """Slack signs every request (`X-Slack-Signature: v0=…` over a fresh timestamp); without
    both headers, or with a stale timestamp, the body is not worth reading."""
    signature = headers.get("x-slack-signature", "")
    try:
        stamp = int(headers.get("x-slack-request-timestamp", ""))
    except ValueError:
        stamp = None
    if not signature.startswith("v0=") or stamp is None:
        return Refusal(401, "a Slack signature is required", "slack-unsigned")
    if abs(now - stamp) > SLACK_SKEW_SECONDS:
        return Refusal(401, "the Slack request timestamp is stale", "slack-stale")
    return None
