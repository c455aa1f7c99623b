"""`POST /github/webhooks`: verify, decode, store, acknowledge. No policy lives here.

The decisions are plain functions of the request's headers and body (`precheck`, `screen`,
`acknowledged`), shared by the two ways the App is served: `WebhookIngress`, a WSGI
middleware in front of Flask (`gunicorn 'app.runtime:create_app()'`; it and the steps that reach the
App's state are `webhook_ingress.py`'s), and the ASGI front of `app.runtime.asgi` (what `the-loop
serve` runs). Either way this path skips Flask's request
machinery, which costs about as much as storing the delivery (`bench/ingest.py`).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from githubkit.webhooks import verify

from app.github.ingest import IngestUnavailable
from app.github.shapes import shape_problem
from app.ingress import cut
from app.store import lane_of

PATH = "/github/webhooks"
MAX_BODY = 25 * 1024 * 1024
# The request headers the decisions read, by lower-case name.
# What GitHub sends: a GUID delivery id and a snake_case event name (digits included, as in
# `projects_v2_item`). The signature covers
# the body only, so these are checked before they reach the store.
DELIVERY_RE = re.compile(r"^[A-Za-z0-9-]{1,64}$")
EVENT_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
PING = "webhook.received"
HEADERS = (
    "content-length",
    "x-github-event",
    "x-github-delivery",
    "x-hub-signature-256",
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    """A response, and the event to count about it (if any) before sending it. Every such
    event is something a stranger can repeat at will, so it goes through the process's
    `SampledLog` under `kind`: counted always, written only a few times a minute."""

    status: str
    body: dict[str, Any]
    headers: tuple[tuple[str, str], ...] = ()
    event: tuple[str, dict[str, Any]] | None = None

    @property
    def kind(self) -> str:
        """What the event is counted as: the refusal's reason, or the event's name."""
        if self.event is None:
            return ""
        name, fields = self.event
        return str(fields.get("reason") or name)

    def encoded(self) -> tuple[bytes, list[tuple[str, str]]]:
        payload = orjson.dumps(self.body)
        headers = [
            ("Content-Type", "application/json"),
            *self.headers,
            ("Content-Length", str(len(payload))),
        ]
        return payload, headers


@dataclass(frozen=True)
class Verified:
    """A delivery whose signature matched, ready to store."""

    delivery_id: str
    event: str
    action: str | None
    body: bytes = field(repr=False)
    lane: str = ""  # the issue, pull request or repository it is about (store/lanes.py)
    # When the body was verified: its acknowledgement's latency is counted from here.
    screened_at: float = field(default_factory=time.perf_counter, compare=False)


UNAVAILABLE = Answer(
    "503 Service Unavailable", {"error": "could not store the delivery; redeliver it"}
)


def rejected(
    status: str,
    error: str,
    reason: str,
    headers: Mapping[str, str],
    remote: str | None = None,
    **extra: Any,
) -> Answer:
    """A refusal, with the event that counts it. Header values are the sender's words: they
    are cut to `FIELD_LIMIT` characters before anything stores or logs them."""
    fields = {
        "reason": reason,
        "delivery": cut(headers.get("x-github-delivery", "")),
        "gh_event": cut(headers.get("x-github-event", "")),
        **({"remote": remote} if remote else {}),
        **extra,
    }
    return Answer(status, {"error": error}, event=("webhook.rejected", fields))


def precheck(method: str, headers: Mapping[str, str]) -> Answer | int:
    """Before reading the body: the method and the declared length. Returns the number of
    bytes to read, or the answer that ends the request."""
    if method != "POST":
        answer = rejected("405 Method Not Allowed", "POST only", "method", headers)
        return replace(answer, headers=(("Allow", "POST"),))
    try:
        length = int(headers.get("content-length") or 0)
    except ValueError:
        return rejected("400 Bad Request", "bad Content-Length", "bad-length", headers)
    if length < 0:
        return rejected("400 Bad Request", "bad Content-Length", "bad-length", headers)
    if length > MAX_BODY:
        return too_large(headers)
    return length


def too_large(headers: Mapping[str, str]) -> Answer:
    return rejected("413 Request Entity Too Large", "payload too large", "too-large", headers)


def too_slow(headers: Mapping[str, str], remote: str | None = None) -> Answer:
    """The body did not arrive within the request's deadline."""
    return rejected(
        "408 Request Timeout", "the body did not arrive in time", "too-slow", headers, remote
    )


def busy(headers: Mapping[str, str], remote: str | None, retry_after: int) -> Answer:
    """Too many strangers' bodies are in flight to read this one (`app.ingress.budget`)."""
    answer = rejected(
        "503 Service Unavailable", "too many bodies in flight; retry later", "busy", headers, remote
    )
    return replace(answer, headers=(("Retry-After", str(retry_after)),))


def screen(
    secret: str | None, headers: Mapping[str, str], body: bytes, remote: str | None
) -> Answer | Verified:
    """The signature (constant time, before anything reads the body), then the headers, the
    JSON and its shape. A ping is answered here; anything else verified comes back to be
    stored."""
    signature = headers.get("x-hub-signature-256", "")
    signed = bool(secret) and signature.startswith("sha256=")
    if not signed or not verify(secret or "", body, signature):
        reason = "bad-signature" if signature else "missing-signature"
        return rejected("401 Unauthorized", "signature does not match", reason, headers, remote)
    return decode(headers, body, remote)


def decode(headers: Mapping[str, str], body: bytes, remote: str | None) -> Answer | Verified:
    """What follows the signature, for a POSTed delivery and one read from GitHub's delivery
    log alike: the event and delivery id in GitHub's form, a JSON object, a ping answered,
    the body's shape matching its event."""
    event = headers.get("x-github-event", "")
    delivery = headers.get("x-github-delivery", "")
    if not EVENT_RE.match(event) or not DELIVERY_RE.match(delivery):
        error = "X-GitHub-Event and X-GitHub-Delivery are required, in GitHub's form"
        return rejected("400 Bad Request", error, "bad-headers", headers, remote)
    try:
        payload = orjson.loads(body)  # several times faster than json.loads on a delivery
    except orjson.JSONDecodeError:
        return rejected("400 Bad Request", "body is not JSON", "not-json", headers, remote)
    if not isinstance(payload, dict):
        error = "body is not a JSON object"
        return rejected("400 Bad Request", error, "not-an-object", headers, remote)
    if event == "ping":
        fields = {"delivery": delivery, "gh_event": event}
        return Answer("200 OK", {"ok": True, "zen": payload.get("zen")}, event=(PING, fields))
    problem = shape_problem(event, payload)
    if problem is not None:
        error = f"the body does not match X-GitHub-Event: {problem}"
        return rejected("400 Bad Request", error, "shape-mismatch", headers, remote)
    action = payload.get("action")
    action = action if isinstance(action, str) else None
    return Verified(delivery, event, action, body, lane_of(payload))


def acknowledged(delivery: Verified, new: bool) -> Answer:
    return Answer("202 Accepted", {"delivery": delivery.delivery_id, "duplicate": not new})


def unavailable(delivery: Verified, error: IngestUnavailable) -> Answer:
    log.error("delivery %s not stored: %s", delivery.delivery_id, error)
    return UNAVAILABLE
