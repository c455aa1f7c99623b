"""`POST /github/webhooks`: verify, decode, store, acknowledge. No policy lives here.

A WSGI middleware in front of the Flask app rather than a Flask view: this is the App's one
hot path, and Flask's request machinery cost as much as storing the delivery (measured with
`bench/ingest`). Every other path goes on to Flask unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from githubkit.webhooks import verify

from app.github.ingest import IngestUnavailable

if TYPE_CHECKING:
    from app.runtime import AppState

PATH = "/github/webhooks"
MAX_BODY = 25 * 1024 * 1024
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Answer = tuple[str, dict[str, Any]]

log = logging.getLogger(__name__)


class WebhookIngress:
    def __init__(self, state: AppState, app: WSGIApp) -> None:
        self.state = state
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != PATH:
            return self.app(environ, start_response)
        headers = [("Content-Type", "application/json")]
        if environ.get("REQUEST_METHOD") != "POST":
            status, answer = "405 Method Not Allowed", {"error": "POST only"}
            headers.append(("Allow", "POST"))
        else:
            status, answer = self.receive(environ)
        body = json.dumps(answer).encode()
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body]

    def receive(self, environ: dict[str, Any]) -> Answer:
        events = self.state.services.events
        event = environ.get("HTTP_X_GITHUB_EVENT", "")
        delivery = environ.get("HTTP_X_GITHUB_DELIVERY", "")
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return "400 Bad Request", {"error": "bad Content-Length"}
        if length > MAX_BODY:
            events.emit("webhook.rejected", reason="too-large", delivery=delivery, gh_event=event)
            return "413 Request Entity Too Large", {"error": "payload too large"}
        body = environ["wsgi.input"].read(length) if length else b""
        signature = environ.get("HTTP_X_HUB_SIGNATURE_256", "")
        secret = self.state.services.settings.github_webhook_secret
        signed = bool(secret) and signature.startswith("sha256=")
        if not signed or not verify(secret or "", body, signature):
            events.emit(
                "webhook.rejected",
                reason="bad-signature" if signature else "missing-signature",
                delivery=delivery,
                gh_event=event,
                remote=environ.get("REMOTE_ADDR"),
            )
            return "401 Unauthorized", {"error": "signature does not match"}
        if not event or not delivery:
            return "400 Bad Request", {"error": "X-GitHub-Event and X-GitHub-Delivery are required"}
        try:
            payload = json.loads(body)
        except ValueError:
            return "400 Bad Request", {"error": "body is not JSON"}
        action = payload.get("action") if isinstance(payload, dict) else None
        if event == "ping":
            events.emit("webhook.received", delivery=delivery, gh_event=event)
            return "200 OK", {"ok": True, "zen": payload.get("zen")}
        try:
            new = self.state.ingest.store(delivery, event, action, body)
        except IngestUnavailable as exc:
            log.error("delivery %s not stored: %s", delivery, exc)
            return "503 Service Unavailable", {
                "error": "could not store the delivery; redeliver it"
            }
        if new:
            self.state.wake_workers()
        return "202 Accepted", {"delivery": delivery, "duplicate": not new}
