"""The App as an ASGI application: what `the-loop serve` runs under gunicorn's asgi worker.

`POST /github/webhooks` is served natively on the event loop: a request waiting for its
delivery to be committed costs a future, not a thread, so one process acknowledges
thousands of deliveries a second with a flat tail (`bench/ingest`). Every other path — the
Slack endpoints, the spawner API, `/status`, `/healthz` — is the Flask app of
`create_app`, run on a thread pool through a2wsgi, unchanged.

`gunicorn 'app:create_app()'` still serves the same App as plain WSGI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from app.github.ingest import IngestUnavailable
from app.github.webhooks import (
    HEADERS,
    MAX_BODY,
    PATH,
    Answer,
    accepted,
    precheck,
    screen,
    too_large,
    unavailable,
)

if TYPE_CHECKING:
    from app.runtime import AppState
    from app.settings import Settings

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HEADER_NAMES = frozenset(name.encode() for name in HEADERS)
# Threads for the Flask side; a spawner's long-poll holds one for up to a minute.
WSGI_THREADS = 32


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


def create_asgi_app(
    settings: Settings | None = None, *, wsgi_threads: int = WSGI_THREADS
) -> AsgiApp:
    """Build the Flask App (`create_app`) and put the native webhook path in front of it."""
    from a2wsgi import WSGIMiddleware

    from app import create_app

    flask_app = create_app(settings)
    state: AppState = flask_app.extensions["the-loop"]
    return AsgiApp(state, WSGIMiddleware(flask_app, workers=wsgi_threads))  # type: ignore[arg-type]


class AsgiApp:
    def __init__(self, state: AppState, fallback: ASGIApp) -> None:
        self.state = state
        self.fallback = fallback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH:
            await self.webhook(scope, receive, send)
        elif scope["type"] == "lifespan":
            await self.lifespan(receive, send)
        else:
            await self.fallback(scope, receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        """Nothing to start (the App is built when loaded); on shutdown stop the workers and
        the ingest writer after what they hold."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await asyncio.to_thread(self.state.close)
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def webhook(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {
            name.decode(): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _HEADER_NAMES  # ASGI servers send names in lower case
        }
        try:
            answer = await self.receive(scope, receive, headers)
        except ClientGone:
            return
        if answer.event is not None:
            name, fields = answer.event
            await asyncio.to_thread(self.state.services.events.emit, name, **fields)
        payload, response_headers = answer.encoded()
        await send(
            {
                "type": "http.response.start",
                "status": int(answer.status.split(" ", 1)[0]),
                "headers": [(k.lower().encode(), v.encode()) for k, v in response_headers],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    async def receive(self, scope: Scope, receive: Receive, headers: dict[str, str]) -> Answer:
        length = precheck(scope["method"], headers)
        if isinstance(length, Answer):
            return length
        body = await read_body(receive, MAX_BODY)
        if body is None:
            return too_large(headers)
        client = scope.get("client")
        secret = self.state.services.settings.github_webhook_secret
        v = screen(secret, headers, body, client[0] if client else None)
        if isinstance(v, Answer):
            return v
        try:
            new = await self.state.ingest.store_async(v.delivery_id, v.event, v.action, v.body)
        except IngestUnavailable as exc:
            return unavailable(v, exc)
        return accepted(self.state, v, new)


async def read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it exceeds `limit` bytes (a chunked body has no
    Content-Length to check up front)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
