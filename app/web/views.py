"""The operator's routes: the status page (`/`), `/status` (the same facts as JSON) and the
parked-delivery retry button. Every route is behind the operator credential (`auth`), checked
before anything of the request body is read."""

from __future__ import annotations

import time
from dataclasses import asdict
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from flask import (
    Blueprint,
    Response,
    current_app,
    g,
    jsonify,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue

from app.config import in_force
from app.github import first_run_steps
from app.store import WorkItem, WorkItemStatus, requeue
from app.web import auth, queries
from app.web.present import MISSING, ago, code_spans, usage_words
from app.workitems import budget_json, priced, spend_report, usage_of

bp = Blueprint("web", __name__, template_folder="templates")
bp.add_app_template_filter(code_spans, "code_spans")

MAX_FORM_BYTES = 4096
SECURITY_HEADERS = {
    # The page runs no script and loads nothing; its forms post only to itself.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # a `?token=` URL must never leave in a Referer
    "Cache-Control": "no-store",
}


def _state() -> Any:
    return current_app.extensions["the-loop"]


def _admin_token() -> str | None:
    token: str | None = _state().services.settings.the_loop_admin_token
    return token


def _refuse(status: int, message: str) -> Response:
    if request.path == "/status" or request.accept_mimetypes.best == "application/json":
        response = jsonify(error=message)
    else:
        response = make_response(render_template("refused.html", message=message), status)
    response.status_code = status
    if status == 401:
        response.headers["WWW-Authenticate"] = 'Bearer realm="the-loop operator"'
    return response


def _login() -> ResponseReturnValue:
    """A correct `?token=`: set the session cookie, then show the same URL without it."""
    rest = [(k, v) for k, v in request.args.items(multi=True) if k != "token"]
    target = url_for(str(request.endpoint), **(request.view_args or {}))
    response = redirect(target + (f"?{urlencode(rest)}" if rest else ""), code=303)
    response.set_cookie(
        auth.COOKIE,
        auth.mint_session(_admin_token() or "", time.time()),
        max_age=auth.SESSION_SECONDS,
        httponly=True,
        samesite="Strict",
        secure=request.is_secure or request.headers.get("X-Forwarded-Proto") == "https",
    )
    return response


@bp.before_request
def _guard() -> ResponseReturnValue | None:
    decision = auth.decide(
        _admin_token(),
        authorization=request.headers.get("Authorization"),
        query_token=request.args.get("token") if request.method == "GET" else None,
        cookie=request.cookies.get(auth.COOKIE),
        now=time.time(),
    )
    if decision.access is auth.Access.NOT_CONFIGURED:
        return _refuse(403, auth.NOT_CONFIGURED)
    if not decision.allowed:
        return _refuse(401, auth.CREDENTIAL_NEEDED)
    if decision.access is auth.Access.LOGIN:
        return _login()
    g.operator = decision
    return None


@bp.after_request
def _headers(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def _csrf() -> str:
    decision: auth.AccessVerdict = g.operator
    if decision.access is not auth.Access.COOKIE:
        return ""  # a bearer caller is not a browser: no form to protect
    return auth.csrf_token(_admin_token() or "", decision.nonce)


def dead_after_of(state: Any) -> timedelta:
    """How long a spawner may stay silent before it counts as dead (its setting)."""
    return timedelta(seconds=state.settings.the_loop_spawner_dead_seconds)


def page_context(
    state: Any, prefix: str, work_item_id: str, item_state: str = ""
) -> dict[str, Any]:
    """Everything the page shows, as plain values (`item_state`: only items in that state)."""
    from channels import status as outbox_status

    now = state.services.clock()
    with state.sessions() as session:
        context = {
            "now": now,
            "installations": queries.installations(session),
            "work_items": queries.work_items(
                session, now, state=item_state, dead_after=dead_after_of(state)
            ),
            "work_items_total": queries.work_items_total(session, item_state),
            "spawners": queries.spawners(session, now, dead_after_of(state)),
            "jobs": queries.pending_jobs(session),
            "parked": queries.parked_deliveries(session),
            "events": queries.recent_events(session, prefix, work_item_id),
            "counts": queries.status_counts(session),
            "log_pass": queries.delivery_log(session),
        }
        rows = context["work_items"]
        used = usage_of(session, [w.id for w in rows])
        context["spend_caps"] = spend_report(state.services.config, session, now)
    config = state.services.config
    context["in_force"] = in_force(config)
    context["config_source"] = config.source
    context["usage"] = {
        w.id: usage_words(used[w.id], priced(config, w.model, used[w.id]), w.minutes) for w in rows
    }
    context["outbox"] = outbox_status(state.sessions)
    context["slack_enabled"] = state.services.settings.slack_enabled
    context["first_run"] = () if state.services.github.configured else next_steps(state.services)
    context["ingress"] = state.services.settings.the_loop_ingress
    context["filters"] = {"event": prefix, "work_item_id": work_item_id, "state": item_state}
    context["item_states"] = [str(s) for s in WorkItemStatus]
    return context


def next_steps(services: Any) -> tuple[str, ...]:
    """What a new operator does next, while no GitHub App is configured."""
    trigger = services.config.routing.trigger
    return first_run_steps(services.settings.the_loop_url, trigger.label, trigger.execute_keyword)


@bp.get("/")
def page() -> ResponseReturnValue:
    prefix = request.args.get("event", "").strip()[:64]
    work_item_id = request.args.get("work_item_id", "").strip()[:256]
    item_state = request.args.get("state", "").strip()
    if item_state not in {str(s) for s in WorkItemStatus}:
        item_state = ""
    context = page_context(_state(), prefix, work_item_id, item_state)
    return render_template(
        "status.html",
        csrf=_csrf(),
        requeued=request.args.get("requeued", "")[:64],
        missed=request.args.get("missed", "")[:64],
        ago=ago,
        missing=MISSING,
        **context,
    )


@bp.post("/deliveries/retry")
def retry_delivery() -> ResponseReturnValue:
    """Put a parked delivery back in the inbox (the Retry button)."""
    decision: auth.AccessVerdict = g.operator
    request.max_content_length = MAX_FORM_BYTES
    if decision.access is auth.Access.COOKIE and not auth.csrf_ok(
        _admin_token() or "", decision.nonce, request.form.get("csrf")
    ):
        return _refuse(403, "The form's CSRF token is missing or stale: reload the page.")
    delivery = request.form.get("delivery", "").strip()[:64]
    state = _state()
    done = bool(delivery) and requeue(state.engine, delivery, state.services.clock())
    if done:
        state.services.events.emit("inbox.requeued", delivery=delivery, by="operator")
        state.wake_workers()
    query = urlencode({"requeued" if done else "missed": delivery})
    return redirect(f"{url_for('web.page')}?{query}#parked", code=303)


@bp.get("/status")
def status() -> ResponseReturnValue:
    """The same facts as the page, for scripts: counts, recent items, parked deliveries."""
    state = _state()
    with state.sessions() as session:
        body: dict[str, Any] = queries.status_counts(session)
        items = queries.work_items(
            session, state.services.clock(), limit=50, dead_after=dead_after_of(state)
        )
        body["recent_not_listed"] = max(queries.work_items_total(session) - len(items), 0)
        usage = usage_of(session, [i.id for i in items])
        budgets = {
            i.id: budget_json(state.services, session, row)
            for i in items
            if (row := session.get(WorkItem, i.id)) is not None
        }
        parked = queries.parked_deliveries(session, limit=20)
        log_pass = queries.delivery_log(session)
        caps = spend_report(state.services.config, session, state.services.clock())
    body["recent"] = [
        {
            "work_item_id": i.id,
            "status": i.status,
            "health": i.health.label,
            "note": i.health.note,
            "title": i.title,
            "url": i.url or None,
            "pull_request": {"number": i.pull_number, "url": i.pull_request}
            if i.pull_number
            else None,
            "updated_at": i.since.isoformat() if i.since else None,
            "usage": {
                **usage[i.id],
                "cost_usd": priced(state.services.config, i.model, usage[i.id]),
            },
            "budget": budgets.get(i.id),
        }
        for i in items
    ]
    body["spend_caps"] = [{**asdict(c), "window": c.window.value} for c in caps]
    body["parked_deliveries"] = [
        {**asdict(d), "received_at": d.received_at.isoformat() if d.received_at else None}
        for d in parked
    ]
    body["delivery_log"] = (
        {**log_pass.counts, "at": log_pass.at.isoformat() if log_pass.at else None}
        if log_pass
        else None
    )
    return jsonify(body)
