"""The App as an ASGI application: what `the-loop serve` runs under gunicorn's asgi worker.

`POST /github/webhooks` is served natively on the event loop: a request waiting for its
delivery to be committed costs a future, not a thread, so one process acknowledges
thousands of deliveries a second with a flat tail (`bench/ingest.py`). Every other path — the
Slack endpoints, the spawner API, `/status`, `/healthz` — is the Flask app of
`create_app`, run on a thread pool through a2wsgi.

No request reaches a Flask thread before its body is whole: each path's credential is
checked first (`app.ingress.doors`), then the body is read here, on the event loop, up to the path's
limit and within the body deadline. A client trickling a body costs a coroutine, never one
of the threads `/healthz` and the spawners' claims need. A body nobody has vouched for yet
(a webhook before its signature is checked, a Slack request, anything without a bearer
token) is read only while the process's `BodyBudget` can hold it, else answered 503: bodies
held open by strangers cost at most the budget. Bodies behind a live token (spawners and
sessions, and sessions are not trusted either) have a budget of their own of the same size,
so neither kind can crowd the other out.

A git request holds a Flask thread while its body streams: its caps (a few per session
token, fewer than the threads in all) are the App's own, `app.gitgate.git_caps`, a WSGI
middleware that holds under any front. Here its body streams from the event loop, and one
that goes quiet between chunks for `the_loop_git_idle_seconds` is cut (408), freeing its
thread.

`gunicorn 'app.runtime:create_app()'` still serves the same App as plain WSGI.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson

from app.fleet import SESSION_PREFIX
from app.github import (
    HEADERS,
    MAX_BODY,
    PATH,
    Answer,
    IngestUnavailable,
    busy,
    precheck,
    screen,
    too_large,
    too_slow,
    unavailable,
)
from app.ingress import GIT_BODY_SECONDS, RETRY_AFTER_SECONDS, BodyBudget, Hold, cut, doors
from app.runtime.serve_errors import ServeError
from app.runtime.webhook_ingress import accepted, counted

if TYPE_CHECKING:
    from app.config import Settings
    from app.runtime.app_state import AppState

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_HEADER_NAMES = frozenset(name.encode() for name in HEADERS)
_DOOR_HEADERS = frozenset(name.encode() for name in doors.HEADERS)
# Threads for the Flask side; a spawner's long-poll holds one for up to a minute.
WSGI_THREADS = 32


def settle_heap() -> None:
    """Move everything the App built at start-up (modules, models, schemas, routes) out of
    the garbage collector's reach. A full collection otherwise walks all of it with every
    request waiting, several times a minute under a flood (`bench/ingest.py` shows the tail)."""
    gc.collect()
    gc.freeze()


class ClientGone(ServeError):
    """The client disconnected before its request body arrived."""


class BodyTooSlow(ServeError):
    """The body did not arrive within the request's deadline."""


class BudgetSpent(ServeError):
    """A body without a declared length grew past what the process's budget could hold."""


def create_asgi_app(
    settings: Settings | None = None, *, wsgi_threads: int = WSGI_THREADS
) -> AsgiApp:
    """Build the Flask App (`create_app`) and put the native webhook path in front of it."""
    from a2wsgi import WSGIMiddleware

    from app.runtime.flask_app import create_app

    flask_app = create_app(settings, web_threads=wsgi_threads)
    state: AppState = flask_app.extensions["the-loop"]
    settle_heap()
    fallback = WSGIMiddleware(flask_app, workers=wsgi_threads)  # type: ignore[arg-type]
    return AsgiApp(state, fallback)  # type: ignore[arg-type]


class AsgiApp:
    def __init__(self, state: AppState, fallback: ASGIApp) -> None:
        self.state = state
        self.fallback = fallback
        self.deadlines = Deadlines(state.settings.the_loop_body_deadline)
        self.budget = BodyBudget(state.settings.the_loop_unverified_body_bytes, MAX_BODY)
        self.vouched_budget = BodyBudget(
            state.settings.the_loop_unverified_body_bytes, doors.SPAWNER_MAX_BODY
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == PATH:
            await self.webhook(scope, receive, send)
        elif scope["type"] == "http":
            await self.guarded(scope, receive, send)
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
        rows = counted(self.state, answer)
        if rows:
            await asyncio.to_thread(self.state.sampled.write, rows)
        payload, response_headers = answer.encoded()
        status = int(answer.status.split(" ", 1)[0])
        if status in (408, 413) or answer.kind == "busy":  # the rest is never read
            response_headers.append(("Connection", "close"))
        await _respond(send, status, payload, response_headers)

    async def receive(self, scope: Scope, receive: Receive, headers: dict[str, str]) -> Answer:
        length = precheck(scope["method"], headers)
        if isinstance(length, Answer):
            return length
        client = scope.get("client")
        remote = client[0] if client else None
        hold = self.budget.hold(length)
        if hold is None:
            return busy(headers, remote, RETRY_AFTER_SECONDS)
        try:  # the body is a stranger's until its signature matches
            body = await self.deadlines.read(receive, MAX_BODY, hold)
            if body is None:
                return too_large(headers)
            secret = self.state.services.settings.github_webhook_secret
            v = screen(secret, headers, body, remote)
        except BodyTooSlow:
            return too_slow(headers, remote)
        except BudgetSpent:
            return busy(headers, remote, RETRY_AFTER_SECONDS)
        finally:
            hold.release()
        if isinstance(v, Answer):
            return v
        try:
            new = await self.state.ingest.store_async(
                v.delivery_id, v.event, v.action, v.body, v.lane
            )
        except IngestUnavailable as exc:
            return unavailable(v, exc)
        return accepted(self.state, v, new)

    async def guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Any other path: its credential, then its body (bounded, on the loop), then Flask."""
        door = doors.door_for(scope["path"])
        headers = {
            name.decode(): value.decode("latin-1")
            for name, value in scope["headers"]
            if name in _DOOR_HEADERS
        }
        refusal = await self.admit(door, headers)
        if refusal is None and door.streamed:
            await self.git(scope, receive, send)
            return
        hold: Hold | None = None
        if refusal is None:
            budget = self.vouched_budget if doors.vouched(door) else self.budget
            hold = budget.hold(_declared(headers))
            if hold is None:
                refusal = doors.busy(RETRY_AFTER_SECONDS)
        try:
            if refusal is None:
                if doors.vouched(door):  # Flask's door need not look the token up again
                    scope[doors.ADMITTED] = True
                try:
                    body = await self.deadlines.read(receive, door.max_body, hold)
                except ClientGone:
                    return
                except BodyTooSlow:
                    refusal = doors.TOO_SLOW
                except BudgetSpent:
                    refusal = doors.busy(RETRY_AFTER_SECONDS)
                else:
                    if body is None:
                        refusal = doors.too_large(door)
            if refusal is not None:
                await self.refuse(scope, send, refusal)
                return
            await self.fallback(scope, _replay(body or b"", receive), send)
        finally:
            if hold is not None:  # a Slack body is verified by Bolt, behind the fallback
                hold.release()

    async def git(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A git request behind a live session token: its body streamed to Flask (where its
        slot is taken), cut when it goes quiet or runs long."""
        idle = self.state.settings.the_loop_git_idle_seconds
        body = streamed(receive, doors.GIT_MAX_BODY, GIT_BODY_SECONDS, idle)
        await self.fallback(scope, body, send)

    async def admit(self, door: doors.Door, headers: dict[str, str]) -> doors.Refusal | None:
        """The door's checks that need no body: its credential, then the declared length."""
        if door.credential is doors.Credential.SLACK:
            refusal = doors.slack_headers_problem(headers, time.time())
            if refusal is not None:
                return refusal
        if door.credential is doors.Credential.BEARER:
            token = doors.bearer(headers)
            if token is None or not await asyncio.to_thread(self.state.known_token, token):
                return doors.NO_TOKEN
        if door.credential is doors.Credential.SESSION_BASIC:
            password = doors.basic_password(headers)
            if password is None or not password.startswith(SESSION_PREFIX):
                return doors.NO_SESSION
            if not await asyncio.to_thread(self.state.known_token, f"Bearer {password}"):
                return doors.NO_SESSION
        length = doors.declared_length(headers, door)
        return length if isinstance(length, doors.Refusal) else None

    async def refuse(self, scope: Scope, send: Send, refusal: doors.Refusal) -> None:
        client = scope.get("client")
        fields = {
            "reason": refusal.reason,
            "path": cut(scope["path"]),
            "remote": client[0] if client else None,
        }
        rows = self.state.sampled.note(refusal.reason, "request.rejected", fields)
        if rows:
            await asyncio.to_thread(self.state.sampled.write, rows)
        if doors.door_for(scope["path"]).streamed:  # git shows a text/plain body, not JSON
            payload = f"the-loop: {refusal.error}\n".encode()
            kind = "text/plain"
        else:
            payload = orjson.dumps({"error": refusal.error, "code": refusal.reason})
            kind = "application/json"
        headers = [("Content-Type", kind), ("Content-Length", str(len(payload)))]
        headers += list(refusal.headers)
        # The rest of a refused body is never read: the connection is not reused.
        await _respond(send, refusal.status, payload, [*headers, ("Connection", "close")])


async def _respond(send: Send, status: int, payload: bytes, headers: list[tuple[str, str]]) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def streamed(receive: Receive, limit: int, seconds: float, idle: float) -> Receive:
    """The client's own `receive`, cut off (`doors.BodyCut`, raised where the body is read)
    once more than `limit` bytes came, or when `doors.BodyClock` says a wait ran out (the
    body not whole `seconds` after the start, or `idle` seconds without a chunk)."""
    size = 0
    clock = doors.BodyClock(seconds, idle)

    async def bounded() -> Message:
        nonlocal size
        try:
            message = await asyncio.wait_for(receive(), clock.wait())
        except TimeoutError:
            raise clock.cut() from None
        size += len(message.get("body", b""))
        if size > limit:
            raise doors.BodyCut(f"the body may be at most {limit} bytes")
        return message

    return bounded


def _declared(headers: dict[str, str]) -> int:
    """The Content-Length `admit` already found well-formed (0 when there is none)."""
    return int(headers.get("content-length") or 0)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands over the buffered body at once, then the client's own events."""
    handed = False

    async def again() -> Message:
        nonlocal handed
        if not handed:
            handed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


class Deadlines:
    """The bodies being read in this process and when each must be whole. One timer a second
    cancels the reads that are late, so a request pays a dict entry for its deadline rather
    than a timer of its own (`asyncio.timeout` cost the webhook path a measurable share)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._due: dict[asyncio.Task[Any], float] = {}
        self._late: set[asyncio.Task[Any]] = set()
        self._sweeping = False

    async def read(self, receive: Receive, limit: int, hold: Hold | None = None) -> bytes | None:
        """`read_body` within the deadline: raises BodyTooSlow once it has passed."""
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        self._due[task] = loop.time() + self.seconds
        if not self._sweeping:
            self._sweeping = True
            loop.call_later(1.0, self._sweep, loop)
        try:
            return await read_body(receive, limit, hold)
        except asyncio.CancelledError:
            if task not in self._late:
                raise
            task.uncancel()
            raise BodyTooSlow from None
        finally:
            self._due.pop(task, None)
            self._late.discard(task)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for task, due in list(self._due.items()):
            if due <= now and task not in self._late:
                self._late.add(task)
                task.cancel()
        if self._due:
            loop.call_later(1.0, self._sweep, loop)
        else:
            self._sweeping = False


async def read_body(receive: Receive, limit: int, hold: Hold | None = None) -> bytes | None:
    """The whole request body, or None once it exceeds `limit` bytes (a chunked body has no
    Content-Length to check up front). Raises ClientGone when the client leaves first, and
    BudgetSpent when the body outgrows its `hold` and the budget cannot grow it."""
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
        if hold is not None and not hold.grow(size):
            raise BudgetSpent
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)
