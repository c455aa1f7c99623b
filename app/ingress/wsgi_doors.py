"""Every door but git's under a WSGI server: the same budget and deadline as the ASGI front.

`the-loop serve` reads each body on its event loop before Flask sees it (`app.runtime.asgi`).
Served as plain WSGI (`gunicorn -k gthread 'app.runtime:create_app()'`), the App reads bodies on
its request threads instead, and this middleware holds the same line there: each path's
credential and declared length are checked before a byte of the body is read
(`app.ingress.doors`); the body then takes a `Hold` on the process's `BodyBudget` (bodies
nobody vouched for and bodies behind a live token each have a budget of their own, as under
the front), past which the request is answered 503 at once; and the body must be whole
within `THE_LOOP_BODY_DEADLINE` seconds (408 otherwise), so a trickling client frees its
thread. A body read whole is handed to the App from memory and its hold given back once the
answer has been sent. A refused body is not read further: the socket's reading side is shut
(`drop_body`) and the connection closed.

Under the ASGI front the body was bounded already (the request carries `asgi.scope`), and
the git gateway's bodies stream under caps of their own (`app.gitgate.git_caps`): both pass
through untouched.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson
from werkzeug.wsgi import ClosingIterator

from app.ingress import doors
from app.ingress.budget import RETRY_AFTER_SECONDS, BodyBudget, Hold
from app.ingress.ingress_errors import IngressError
from app.ingress.sampling import cut
from app.ingress.wsgi_body import IdleInput, client_socket, declared_length_of, drop_body

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

    from app.ingress.door_state import DoorState

CHUNK = 64 * 1024
REASONS = {400: "Bad Request", 401: "Unauthorized", 408: "Request Timeout"}
REASONS |= {413: "Content Too Large", 503: "Service Unavailable"}


class _Refused(IngressError):
    def __init__(self, refusal: doors.Refusal) -> None:
        super().__init__(refusal.error)
        self.refusal = refusal


@dataclass(frozen=True)
class WebhookDoor:
    """The webhook path and its body limit (`app.github.webhooks` owns both)."""

    path: str
    max_body: int


class BodyDoors:
    """The App's WSGI application behind the doors' checks, budget and body deadline."""

    def __init__(self, app: WSGIApplication, state: DoorState, webhook: WebhookDoor) -> None:
        self.app = app
        self.state = state
        self.webhook = webhook
        budget = state.settings.the_loop_unverified_body_bytes
        self.deadline = state.settings.the_loop_body_deadline
        self.budget = BodyBudget(budget, webhook.max_body)
        self.vouched_budget = BodyBudget(budget, doors.SPAWNER_MAX_BODY)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if "asgi.scope" in environ or path.startswith(doors.GIT_PATH + "/"):
            return self.app(environ, start_response)
        length = declared_length_of(environ)
        if length == 0:
            return self.app(environ, start_response)  # no body: nothing to hold
        door = self.door_for(path)
        hold: Hold | None = None
        try:
            self.admit(door, environ)
            budget = self.vouched_budget if doors.vouched(door) else self.budget
            hold = budget.hold(length or 0)
            if hold is None:
                raise _Refused(doors.busy(RETRY_AFTER_SECONDS))
            body = self.read(environ, door, hold, length)
        except _Refused as refused:
            if hold is not None:
                hold.release()
            return self.refuse(environ, start_response, refused.refusal)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        try:
            return ClosingIterator(self.app(environ, start_response), [hold.release])
        except BaseException:
            hold.release()
            raise

    def door_for(self, path: str) -> doors.Door:
        if path == self.webhook.path:  # signed over its body: a stranger's until checked
            return doors.Door(doors.Credential.NONE, self.webhook.max_body)
        return doors.door_for(path)

    def admit(self, door: doors.Door, environ: WSGIEnvironment) -> None:
        """The door's checks that need no body (as the ASGI front's `admit`)."""
        headers = {
            "authorization": environ.get("HTTP_AUTHORIZATION", ""),
            "content-length": environ.get("CONTENT_LENGTH", ""),
            "x-slack-signature": environ.get("HTTP_X_SLACK_SIGNATURE", ""),
            "x-slack-request-timestamp": environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", ""),
        }
        if door.credential is doors.Credential.SLACK:
            refusal = doors.slack_headers_problem(headers, time.time())
            if refusal is not None:
                raise _Refused(refusal)
        if door.credential is doors.Credential.BEARER:
            token = doors.bearer(headers)
            if token is None or not self.state.known_token(token):
                raise _Refused(doors.NO_TOKEN)
        declared = doors.declared_length(headers, door)
        if isinstance(declared, doors.Refusal):
            raise _Refused(declared)

    def read(
        self, environ: WSGIEnvironment, door: doors.Door, hold: Hold, length: int | None
    ) -> bytes:
        """The whole body, within the deadline, the door's limit and what `hold` can grow to."""
        stream = environ["wsgi.input"]
        sock = client_socket(environ)
        timed: IdleInput | None = None
        if sock is not None:
            clock = doors.BodyClock(self.deadline, self.deadline)
            timed = IdleInput(stream, sock, clock, guard=True, length=length)
            environ["wsgi.input"] = stream = timed
        chunks: list[bytes] = []
        size = 0
        try:
            while length is None or size < length:
                want = CHUNK if length is None else min(CHUNK, length - size)
                chunk = stream.read(want)
                if not chunk:
                    break
                size += len(chunk)
                if size > door.max_body:
                    raise _Refused(doors.too_large(door))
                if not hold.grow(size):
                    raise _Refused(doors.busy(RETRY_AFTER_SECONDS))
                chunks.append(chunk)
        except (doors.BodyCut, OSError) as exc:  # late, quiet, or the client is gone
            raise _Refused(doors.TOO_SLOW) from exc
        finally:
            if timed is not None:
                timed.close()
                environ["wsgi.input"] = timed.stream
        return b"".join(chunks)

    def refuse(
        self, environ: WSGIEnvironment, start_response: StartResponse, refusal: doors.Refusal
    ) -> Iterable[bytes]:
        """The refusal in the doors' JSON, counted; the rest of the body is never read."""
        drop_body(environ)
        fields = {
            "reason": refusal.reason,
            "path": cut(environ.get("PATH_INFO", "")),
            "remote": environ.get("REMOTE_ADDR"),
        }
        rows = self.state.sampled.note(refusal.reason, "request.rejected", fields)
        if rows:
            self.state.sampled.write(rows)
        payload = orjson.dumps({"error": refusal.error, "code": refusal.reason})
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
        headers += [*refusal.headers, ("Connection", "close")]
        start_response(f"{refusal.status} {REASONS.get(refusal.status, 'Refused')}", headers)
        return [payload]
