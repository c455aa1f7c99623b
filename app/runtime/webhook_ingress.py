"""The webhook path's steps that reach the App's state, shared by its two fronts: the 202
for a stored delivery (waking the inbox workers when a handler acts on it, and timing the
acknowledgement), an answer's event counted through the process's `SampledLog`, and
`WebhookIngress`, the path as WSGI middleware in front of Flask (`gunicorn
'app.runtime:create_app()'`). The decisions themselves are `webhooks.py`'s plain functions."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from app.github import (
    HEADERS,
    PATH,
    Answer,
    IngestUnavailable,
    Verified,
    acknowledged,
    precheck,
    screen,
    unavailable,
)
from app.ingress import Record

if TYPE_CHECKING:
    from app.runtime.app_state import AppState

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def accepted(state: AppState, delivery: Verified, new: bool) -> Answer:
    """The 202 for a stored delivery; a new one some handler acts on wakes the workers."""
    if new and state.router.routes(delivery.event, delivery.action):
        state.wake_workers()
    state.meters.acknowledge(new, delivery.screened_at)
    return acknowledged(delivery, new)


def counted(state: AppState, answer: Answer) -> list[Record]:
    """Count the answer's event; the rows (if any) to write for it now."""
    if answer.event is None:
        return []
    name, fields = answer.event
    return state.sampled.note(answer.kind, name, fields)


class WebhookIngress:
    """The webhook path as WSGI middleware; every other path goes on to `app` unchanged."""

    def __init__(self, state: AppState, app: WSGIApp) -> None:
        self.state = state
        self.app = app

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != PATH:
            return self.app(environ, start_response)
        answer = self.receive(environ)
        self.state.sampled.write(counted(self.state, answer))
        payload, headers = answer.encoded()
        start_response(answer.status, headers)
        return [payload]

    def receive(self, environ: dict[str, Any]) -> Answer:
        headers = {
            name: environ[key]
            for name in HEADERS
            if (key := _environ_key(name)) in environ and environ[key] is not None
        }
        length = precheck(environ.get("REQUEST_METHOD", ""), headers)
        if isinstance(length, Answer):
            return length
        body = environ["wsgi.input"].read(length) if length else b""
        secret = self.state.services.settings.github_webhook_secret
        v = screen(secret, headers, body, environ.get("REMOTE_ADDR"))
        if isinstance(v, Answer):
            return v
        try:
            new = self.state.ingest.store(v.delivery_id, v.event, v.action, v.body, v.lane)
        except IngestUnavailable as exc:
            return unavailable(v, exc)
        return accepted(self.state, v, new)


def _environ_key(header: str) -> str:
    if header == "content-length":
        return "CONTENT_LENGTH"
    return "HTTP_" + header.upper().replace("-", "_")
