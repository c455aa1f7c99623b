"""`GET /status`: what the App is doing — work items by status, deliveries, jobs, Slack
messages waiting — so nothing stuck goes unnoticed. Answered only to loopback callers:
titles of private issues are not for the public webhook endpoint."""

from __future__ import annotations

import ipaddress

from flask import Blueprint, abort, current_app, jsonify, request
from flask.typing import ResponseReturnValue
from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.store.tables import Delivery, Job, SlackOutbox, WorkItem

bp = Blueprint("status", __name__)


def _counts(session: Session, column: InstrumentedAttribute[str]) -> dict[str, int]:
    rows = session.execute(select(column, func.count()).group_by(column)).all()
    return {str(value): int(count) for value, count in rows}


@bp.get("/status")
def status() -> ResponseReturnValue:
    if not ipaddress.ip_address(request.remote_addr or "0.0.0.0").is_loopback:
        abort(404)
    state = current_app.extensions["the-loop"]
    with Session(state.engine) as session:
        items = session.scalars(
            select(WorkItem).order_by(WorkItem.updated_at.desc()).limit(50)
        ).all()
        parked = session.scalars(
            select(Delivery)
            .where(Delivery.state == "parked")
            .order_by(Delivery.id.desc())
            .limit(20)
        ).all()
        body = {
            "work_items": _counts(session, WorkItem.state),
            "inbox": _counts(session, Delivery.state),
            "jobs": _counts(session, Job.state),
            "slack_outbox": _counts(session, SlackOutbox.state),
            "recent": [
                {
                    "work_item": i.id,
                    "status": i.state,
                    "title": i.title,
                    "updated_at": i.updated_at.isoformat(),
                }
                for i in items
            ],
            "parked_deliveries": [
                {
                    "delivery": d.delivery_id,
                    "event": d.event,
                    "action": d.action,
                    "attempts": d.attempts,
                    "error": d.last_error,
                }
                for d in parked
            ],
        }
    return jsonify(body)
