"""The spawner API's door, on the Flask side: the credential before the body, and at most
`SPAWNER_MAX_BODY` bytes of it (the ASGI front checks the same before Flask sees the request;
this is what the plain WSGI App has). Registered on every `/spawner/v1` blueprint."""

from __future__ import annotations

from typing import Any

from flask import Response, current_app, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from app.ingress.doors import ADMITTED, SPAWNER_MAX_BODY

TOO_LARGE = f"the body may be at most {SPAWNER_MAX_BODY} bytes"


class BodyTooLarge(ValueError):
    """The body went past `SPAWNER_MAX_BODY` (a chunked one has no length to refuse early)."""


def credential_first() -> tuple[Response, int] | None:
    """A `before_request` hook: 401 for an unknown or expired token, 413 for a body declared
    too large — both before any of the body is read. Behind the ASGI front, which looked the
    token up before it read the body, the lookup is not repeated; each endpoint still
    authenticates inside the transaction that acts on the caller's behalf."""
    if not _admitted_by_front():
        header = request.headers.get("Authorization")
        if not header or not current_app.extensions["the-loop"].known_token(header):
            return jsonify(error="a valid token is required (Authorization: Bearer …)"), 401
    request.max_content_length = SPAWNER_MAX_BODY
    if (request.content_length or 0) > SPAWNER_MAX_BODY:
        return jsonify(error=TOO_LARGE), 413
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
