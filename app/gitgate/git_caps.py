"""The git gateway's caps in one App process, whatever front serves it.

A git request (`/git/…`) holds one of the process's request threads while its body streams
in and its answer streams out, and a session's token is not trusted: one session could
otherwise hold every thread with requests that trickle. `GitCaps` is a WSGI middleware
around the App, so the caps hold under `the-loop serve` (the ASGI front hands the request to
the same Flask app) and under plain gunicorn alike. It takes a slot (`app.ingress.slots`)
per request: at most `each` per session token and `total` in all; past either cap git is
answered 503 in its text/plain and the refusal is counted. The slot is held until the
answer has been sent.

The body's clock (`app.ingress.doors.BodyClock`) holds too. Under the ASGI front the body
arrives from the event loop, which cuts a quiet one itself; under a WSGI server the thread
reads the client's socket, so while the body is read that socket waits at most as long as
the clock allows, and a read that waits in vain ends the request with 408, freeing the
thread.

A git answer given before its body was read to the end (a refusal, a cut, a bad token) shuts
the reading side of the client's socket once it is sent. A WSGI server would otherwise read
the rest itself to keep the connection: gunicorn's threaded worker ignores the answer's
`Connection: close`, drains the body on the request's thread for seconds, then closes the
connection on its one main thread, the thread that accepts every connection, lingering
there while the client still sends. With the reading side shut both reads end at once.

The caps are per process: with N worker processes a session may hold N times `each` requests,
and the App N times `total`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from werkzeug.wsgi import ClosingIterator

from app.fleet import SESSION_PREFIX
from app.ingress import (
    GIT_BODY_SECONDS,
    GIT_PATH,
    RETRY_AFTER_SECONDS,
    BodyClock,
    IdleInput,
    Slots,
    basic_password,
    client_socket,
    cut,
    declared_length_of,
    drop_body,
    git_busy,
)

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from app.ingress import DoorState


class GitCaps:
    """The App's WSGI application with the git gateway's caps in front of `/git/…`."""

    def __init__(self, app: WSGIApplication, state: DoorState, total: int, each: int) -> None:
        self.app = app
        self.state = state
        self.slots = Slots(total, each)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if not environ.get("PATH_INFO", "").startswith(GIT_PATH + "/"):
            return self.app(environ, start_response)
        holder = basic_password({"authorization": environ.get("HTTP_AUTHORIZATION", "")})
        if holder is None or not holder.startswith(SESSION_PREFIX):
            # No session token: the view refuses it before reading a byte of its body.
            body = self.bound_body(environ, guard=False)
            answer = self.app(environ, start_response)
            return ClosingIterator(answer, [body.close]) if body is not None else answer
        refused = self.slots.take(holder)
        if refused is not None:
            return self.refuse(environ, start_response, refused)
        given = False

        def give() -> None:
            nonlocal given
            if not given:
                given = True
                self.slots.give(holder)

        body = self.bound_body(environ)
        done = [give, body.close] if body is not None else [give]
        try:
            return ClosingIterator(self.app(environ, start_response), done)
        except BaseException:
            for step in done:
                step()
            raise

    def bound_body(self, environ: WSGIEnvironment, guard: bool = True) -> IdleInput | None:
        """Under a WSGI server that hands over its socket: the body read on the body's clock
        (and, with `guard`, cut at its deadline even inside a server's looping read)."""
        sock = client_socket(environ)
        if sock is None:
            return None
        idle = self.state.settings.the_loop_git_idle_seconds
        clock = BodyClock(GIT_BODY_SECONDS, idle)
        length = declared_length_of(environ)
        body = IdleInput(environ["wsgi.input"], sock, clock, guard=guard, length=length)
        environ["wsgi.input"] = body
        return body

    def refuse(
        self, environ: WSGIEnvironment, start_response: StartResponse, cap: str
    ) -> Iterable[bytes]:
        refusal = git_busy(RETRY_AFTER_SECONDS)
        fields = {
            "reason": refusal.reason,
            "path": cut(environ.get("PATH_INFO", "")),
            "remote": environ.get("REMOTE_ADDR"),
            "cap": cap,
        }
        drop_body(environ)  # and the reading side shut: gunicorn reads no more of it either
        rows = self.state.sampled.note(refusal.reason, "request.rejected", fields)
        if rows:
            self.state.sampled.write(rows)
        payload = f"the-loop: {refusal.error}\n".encode()
        headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(payload)))]
        # The rest of the body is never read: the connection is not kept.
        headers += [*refusal.headers, ("Connection", "close")]
        start_response(f"{refusal.status} Service Unavailable", headers)
        return [payload]
