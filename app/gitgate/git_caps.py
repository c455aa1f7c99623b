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

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from werkzeug.wsgi import ClosingIterator

from app.fleet.tokens import SESSION_PREFIX
from app.ingress.budget import RETRY_AFTER_SECONDS
from app.ingress.doors import (
    GIT_BODY_SECONDS,
    GIT_PATH,
    BodyClock,
    BodyCut,
    basic_password,
    git_busy,
)
from app.ingress.sampling import cut
from app.ingress.slots import Slots

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from app.runtime import AppState

# The keys under which WSGI servers hand the application the client's socket.
SOCKET_KEYS = ("gunicorn.socket", "werkzeug.socket")
# How long a refused request's body may keep its thread: what has come already is read.
GLANCE_SECONDS = 0.05
GLANCE_BYTES = 1024 * 1024


class IdleInput:
    """A WSGI body stream whose reads wait on the client's socket only as long as `clock`
    allows; a read that times out raises the clock's `BodyCut` (the view answers it).

    A server's read may loop until it has all the bytes it was asked for, and a client that
    sends one byte just inside each idle gap would keep it looping past the whole body's
    deadline; with `guard`, a timer ends the socket's reading side at that deadline, so such
    a read ends and is cut too. `close` stops the timer, gives the socket back as it was and,
    when the body was not read to its end (`length`: its Content-Length, None when chunked),
    shuts the socket's reading side: nobody reads the rest of it after the answer."""

    def __init__(
        self,
        stream: Any,
        sock: socket.socket,
        clock: BodyClock,
        guard: bool = False,
        length: int | None = None,
    ) -> None:
        self.stream = stream
        self.sock = sock
        self.clock = clock
        self.length = length
        self.taken = 0
        self.ended = False
        self.prior = sock.gettimeout()
        self.timer: threading.Timer | None = None
        if guard:
            self.timer = threading.Timer(max(clock.left(), 0.0), self._stop_reading)
            self.timer.daemon = True
            self.timer.start()

    def _stop_reading(self) -> None:
        with contextlib.suppress(OSError):  # the client is gone
            self.sock.shutdown(socket.SHUT_RD)

    def _bounded(self, read: Callable[[], bytes]) -> bytes:
        self.sock.settimeout(max(self.clock.wait(), 0.001))
        try:
            data = read()
        except TimeoutError:
            raise self.clock.cut() from None
        except Exception:
            if self.clock.left() <= 0:  # the guard ended the reading side
                raise self.clock.cut() from None
            raise
        finally:
            self.restore()
        self.taken += len(data)
        self.ended = self.ended or not data
        if self.clock.left() <= 0:
            raise self.clock.cut()
        return data

    def read(self, size: int = -1) -> bytes:
        return self._bounded(lambda: self.stream.read(size))

    def readline(self, size: int = -1) -> bytes:
        return self._bounded(lambda: self.stream.readline(size))

    def restore(self) -> None:
        """The socket as the server had it (its answer is sent without our clock)."""
        with contextlib.suppress(OSError):  # the client is gone
            self.sock.settimeout(self.prior)

    def unread(self) -> bool:
        """Whether some of the body may still be on its way: not read to its end."""
        return not self.ended and (self.length is None or self.taken < self.length)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.restore()
        if self.unread():
            self._stop_reading()


class GitCaps:
    """The App's WSGI application with the git gateway's caps in front of `/git/…`."""

    def __init__(self, app: WSGIApplication, state: AppState, total: int, each: int) -> None:
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
        sock = _socket(environ)
        if sock is None:
            return None
        idle = self.state.settings.the_loop_git_idle_seconds
        clock = BodyClock(GIT_BODY_SECONDS, idle)
        length = _length(environ)
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
        _drop_body(environ)  # and the reading side shut: gunicorn reads no more of it either
        rows = self.state.sampled.note(refusal.reason, "request.rejected", fields)
        if rows:
            self.state.sampled.write(rows)
        payload = f"the-loop: {refusal.error}\n".encode()
        headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(payload)))]
        # The rest of the body is never read: the connection is not kept.
        headers += [*refusal.headers, ("Connection", "close")]
        start_response(f"{refusal.status} Service Unavailable", headers)
        return [payload]


def _socket(environ: WSGIEnvironment) -> socket.socket | None:
    """The client's socket, when the WSGI server hands it over (the ASGI front does not)."""
    if "wsgi.input" not in environ:
        return None
    found = (environ.get(key) for key in SOCKET_KEYS)
    return next((sock for sock in found if isinstance(sock, socket.socket)), None)


def _length(environ: WSGIEnvironment) -> int | None:
    """The body's length as the request declares it: None when chunked (known at its end)."""
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    try:
        return max(int(environ.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return None


def _drop_body(environ: WSGIEnvironment) -> None:
    """A refused request's body: what has come already is read, without waiting for more.
    A body still trickling in has the socket's reading side shut, so the server reads no
    more of it either (on this thread or on its main one) and closes the connection."""
    sock = _socket(environ)
    if sock is None:
        return
    clock = BodyClock(GLANCE_SECONDS, GLANCE_SECONDS)
    quick = IdleInput(environ["wsgi.input"], sock, clock, length=_length(environ))
    size = 0
    with contextlib.suppress(BodyCut, OSError, ValueError):
        while size <= GLANCE_BYTES and (chunk := quick.read(64 * 1024)):
            size += len(chunk)
    quick.close()
