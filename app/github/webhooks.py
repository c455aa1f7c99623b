"""`POST /github/webhooks`: verify, decode, store, acknowledge. No policy lives here."""

from __future__ import annotations

import json

from flask import Blueprint, current_app, jsonify, request
from flask.typing import ResponseReturnValue
from githubkit.webhooks import verify

from app.github.ingest import IngestUnavailable

MAX_BODY = 25 * 1024 * 1024

bp = Blueprint("github", __name__)


@bp.post("/github/webhooks")
def receive() -> ResponseReturnValue:
    state = current_app.extensions["the-loop"]
    events = state.services.events
    event = request.headers.get("X-GitHub-Event", "")
    delivery = request.headers.get("X-GitHub-Delivery", "")
    if (request.content_length or 0) > MAX_BODY:
        events.emit("webhook.rejected", reason="too-large", delivery=delivery, gh_event=event)
        return jsonify(error="payload too large"), 413
    body = request.get_data(cache=False)
    signature = request.headers.get("X-Hub-Signature-256", "")
    secret = state.services.settings.github_webhook_secret
    if not signature.startswith("sha256=") or not verify(secret, body, signature):
        events.emit(
            "webhook.rejected",
            reason="bad-signature" if signature else "missing-signature",
            delivery=delivery,
            gh_event=event,
            remote=request.remote_addr,
        )
        return jsonify(error="signature does not match"), 401
    if not event or not delivery:
        return jsonify(error="X-GitHub-Event and X-GitHub-Delivery are required"), 400
    try:
        payload = json.loads(body)
    except ValueError:
        return jsonify(error="body is not JSON"), 400
    action = payload.get("action") if isinstance(payload, dict) else None
    if event == "ping":
        events.emit("webhook.received", delivery=delivery, gh_event=event)
        return jsonify(ok=True, zen=payload.get("zen")), 200
    try:
        new = state.ingest.store(delivery, event, action, body)
    except IngestUnavailable as exc:
        current_app.logger.error("delivery %s not stored: %s", delivery, exc)
        return jsonify(error="could not store the delivery; redeliver it"), 503
    if new:
        state.wake_workers()
    return jsonify(delivery=delivery, duplicate=not new), 202
