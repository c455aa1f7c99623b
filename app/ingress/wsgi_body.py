"""A request body as a WSGI server hands it over, read on a clock.

Under a WSGI server the thread that runs the App reads the client's socket itself, so a body
that trickles holds that thread. `IdleInput` makes each read wait on the socket only as
long as the body's clock (`app.ingress.doors.BodyClock`) allows, and `drop_body` ends a
refused body without waiting for the rest of it. Used by the git gateway's caps
(`app.gitgate.git_caps`) and by the body doors every other path comes in by
(`app.ingress.wsgi_doors`), under any WSGI front.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.ingress.doors import BodyClock, BodyCut

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIEnvironment

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


def client_socket(environ: WSGIEnvironment) -> socket.socket | None:
    """The client's socket, when the WSGI server hands it over (the ASGI front does not)."""
    if "wsgi.input" not in environ:
        return None
    found = (environ.get(key) for key in SOCKET_KEYS)
    return next((sock for sock in found if isinstance(sock, socket.socket)), None)


def declared_length_of(environ: WSGIEnvironment) -> int | None:
    """The body's length as the request declares it: None when chunked (known at its end)."""
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    try:
        return max(int(environ.get("CONTENT_LENGTH") or 0), 0)
    except ValueError:
        return None


def drop_body(environ: WSGIEnvironment) -> None:
    """A refused request's body: what has come already is read, without waiting for more.
    A body still trickling in has the socket's reading side shut, so the server reads no
    more of it either (on this thread or on its main one) and closes the connection."""
    sock = client_socket(environ)
    if sock is None:
        return
    clock = BodyClock(GLANCE_SECONDS, GLANCE_SECONDS)
    quick = IdleInput(environ["wsgi.input"], sock, clock, length=declared_length_of(environ))
    size = 0
    with contextlib.suppress(BodyCut, OSError, ValueError):
        while size <= GLANCE_BYTES and (chunk := quick.read(64 * 1024)):
            size += len(chunk)
    quick.close()
