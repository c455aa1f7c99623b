"""The spawner API's door, on the Flask side: the credential before the body, at most
`SPAWNER_MAX_BODY` bytes of it (the ASGI front checks the same before Flask sees the request;
this is what the plain WSGI App has), and the one way a `/spawner/v1` call is refused.

Every `/spawner/v1` blueprint is `guard`ed: the credential check runs before its views, and
one error handler answers every refusal as JSON `{"error": "<one line>", "code": "<slug>"}`
with the status that says whose fault it is. A view raises `ApiError`; the domain's own
refusals (a comment, a pull request, a phase move) are translated to it here, in one place.
The git gateway (`/git/…`) is not a JSON API: git's client shows a text/plain body, so it
answers its refusals in that shape instead.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.fleet.comments import CommentRefused
from app.fleet.fleet_errors import FleetError
from app.ingress import ADMITTED, SPAWNER_MAX_BODY
from app.workitems import MoveRefused, PullRequestRefused, UnseenArtifacts

TOO_LARGE = f"the body may be at most {SPAWNER_MAX_BODY} bytes"

# The code an error carries when its raiser names none: the status, as a word a client can
# branch on. `bad-token` and `too-large` are the ASGI front's reasons for the same refusals.
CODES = {
    400: "bad-request",
    401: "bad-token",
    403: "forbidden",
    404: "not-found",
    409: "conflict",
    413: "too-large",
    422: "refused",
    425: "not-seen-yet",
    502: "github",
    503: "unavailable",
}


class ApiError(FleetError):
    """A `/spawner/v1` call refused: the HTTP status, a short code and the one line the
    caller is told (the message)."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code or CODES.get(status, "error")


class BodyTooLarge(FleetError, ValueError):
    """The body went past `SPAWNER_MAX_BODY` (a chunked one has no length to refuse early)."""


def loop_state() -> Any:
    """The App's state (engine, services, settings) the spawner API's views act with."""
    return current_app.extensions["the-loop"]


def refusal(error: ApiError) -> tuple[Response, int]:
    """The one JSON shape of a refused `/spawner/v1` call."""
    return jsonify(error=str(error), code=error.code), error.status


def as_api_error(exc: Exception) -> ApiError:
    """A domain refusal as the API answers it (an ApiError stays itself)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, (CommentRefused, PullRequestRefused)):
        return ApiError(exc.status, str(exc))
    if isinstance(exc, UnseenArtifacts):  # the spawner has not seen the artifacts (yet)
        return ApiError(425, str(exc))
    if isinstance(exc, MoveRefused):  # asked from a position the App does not hold: 409
        return ApiError(409, str(exc), "stale-move") if exc.stale else ApiError(422, str(exc))
    raise TypeError(f"{type(exc).__name__} is not a refusal of the spawner API")


def _answer(exc: Exception) -> tuple[Response, int]:
    return refusal(as_api_error(exc))


def guard(bp: Blueprint) -> Blueprint:
    """Put a `/spawner/v1` blueprint behind the door: the credential first, and the one
    error handler for `ApiError` and the domain refusals."""
    bp.before_request(credential_first)
    for kind in (ApiError, CommentRefused, PullRequestRefused, MoveRefused):
        bp.register_error_handler(kind, _answer)
    return bp


def credential_first() -> tuple[Response, int] | None:
    """A `before_request` hook: 401 for an unknown or expired token, 413 for a body declared
    too large — both before any of the body is read. Behind the ASGI front, which looked the
    token up before it read the body, the lookup is not repeated; each endpoint still
    authenticates inside the transaction that acts on the caller's behalf."""
    if not _admitted_by_front():
        header = request.headers.get("Authorization")
        if not header or not loop_state().known_token(header):
            return refusal(ApiError(401, "a valid token is required (Authorization: Bearer …)"))
    request.max_content_length = SPAWNER_MAX_BODY
    if (request.content_length or 0) > SPAWNER_MAX_BODY:
        return refusal(ApiError(413, TOO_LARGE))
    return None


def _admitted_by_front() -> bool:
    scope = request.environ.get("asgi.scope")
    return isinstance(scope, dict) and scope.get(ADMITTED) is True


def json_object() -> dict[str, Any] | None:
    """The body as a JSON object, None when it is not one; raises BodyTooLarge."""
    try:
        request.get_data(cache=True)
        request.stream.read(1)  # past the limit (a chunked body) this raises, not truncates
    except RequestEntityTooLarge as exc:
        raise BodyTooLarge(TOO_LARGE) from exc
    data = request.get_json(silent=True)
    return data if isinstance(data, dict) else None


def json_body() -> dict[str, Any]:
    """The body as a JSON object, or the ApiError (413 too large, 400 not an object)."""
    try:
        data = json_object()
    except BodyTooLarge as exc:
        raise ApiError(413, str(exc)) from exc
    if data is None:
        raise ApiError(400, "the body must be a JSON object")
    return data
