"""The App's Flask application: `create_app(settings)` builds it (webhook intake, health
check, status page, the spawner and git gateways' routes, inbox workers). WSGI servers load it
as `app.runtime:create_app()`; nothing is built at import time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app import __version__

if TYPE_CHECKING:
    from flask import Flask

    from app.config import Settings


def create_app(
    settings: Settings | None = None,
    *,
    start_workers: bool | None = None,
    web_threads: int = 32,
) -> Flask:
    """Build the App: webhook ingress, health check, status page, inbox workers. Its
    database pool is sized for `web_threads` request threads and its inbox workers.

    Refuses to start without a webhook secret: an App that cannot verify deliveries must
    not accept them. In pull mode (THE_LOOP_INGRESS=pull) it reads GitHub's delivery log
    instead and needs none; one set still lets it accept signed deliveries.
    """
    from flask import Flask, jsonify
    from flask.typing import ResponseReturnValue

    from app.config import SettingsError, load_settings
    from app.fleet import LEASE_CONFIG, checks_bp, phase_bp, pulls_bp, spawner_bp
    from app.gitgate import GitCaps, git_bp
    from app.github import MAX_BODY
    from app.github import PATH as WEBHOOK_PATH
    from app.ingress import BodyDoors, WebhookDoor
    from app.runtime.app_state import build_state
    from app.runtime.webhook_ingress import WebhookIngress
    from app.web import metrics_bp, web_bp
    from channels import web as slack_web

    settings = settings or load_settings()
    if not settings.github_webhook_secret and settings.the_loop_ingress == "push":
        raise SettingsError(
            "GITHUB_WEBHOOK_SECRET is required: the App refuses to start without it"
        )
    state = build_state(settings, web_threads=web_threads)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    app.config[LEASE_CONFIG] = settings.the_loop_job_lease_seconds
    app.extensions["the-loop"] = state
    app.wsgi_app = WebhookIngress(state, app.wsgi_app)  # type: ignore[method-assign]
    # /git/…: the git gateway's caps per process, under any front (half the threads in all).
    git_total = settings.the_loop_git_requests or max(1, web_threads // 2)
    each = settings.the_loop_git_requests_per_session
    app.wsgi_app = GitCaps(app.wsgi_app, state, git_total, each)  # type: ignore[method-assign]
    # Every other body: its door, the process's body budget and deadline, under any front.
    webhook = WebhookDoor(WEBHOOK_PATH, MAX_BODY)
    app.wsgi_app = BodyDoors(app.wsgi_app, state, webhook)  # type: ignore[method-assign]
    slack_web.init_app(
        app, state.services, state.sessions
    )  # POST /slack/events, only when a Slack bot token is set
    app.register_blueprint(web_bp)  # the status page and /status, for the operator only
    app.register_blueprint(metrics_bp)  # /metrics: the operator or a scrape token
    app.register_blueprint(spawner_bp)
    app.register_blueprint(phase_bp)
    app.register_blueprint(pulls_bp)
    app.register_blueprint(checks_bp)  # `the-loop checks`: a PR's check runs and job logs
    app.register_blueprint(git_bp)  # /git/…: a session's origin, forwarded to GitHub

    @app.get("/healthz")
    def healthz() -> ResponseReturnValue:
        return jsonify(ok=True, version=__version__)

    workers = settings.the_loop_inbox_workers if start_workers in (None, True) else 0
    if start_workers is None or start_workers:
        state.start_workers(workers)
    return app
