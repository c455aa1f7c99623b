"""The local page `the-loop setup` serves: GitHub's App manifest flow, explained.

`/` shows what will be registered (name, owner, webhook URL, each permission and event with
the reason it is needed) above the button that posts the manifest to GitHub. GitHub sends the
browser back to `/callback` with a one-hour `code`; the page trades it for the App's
credentials, writes them to `.env`, and says which file now holds what (never the values) and
what to do next: install the App on repositories.

The page answers only requests addressed to this machine (`Host: 127.0.0.1` or `localhost`,
any port): a web page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) can
neither read a `state` nor finish the flow with an App of its own. Each visit of `/` gets a
fresh `state`, good for one callback within `STATE_TTL` seconds.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, Response, render_template, request

from app.github import (
    WRITTEN_KEYS,
    Registration,
    SetupError,
    env_values_from_conversion,
    exchange_code,
    install_url,
    merge_env_file,
    unreachable_from_github,
)
from app.web.present import code_spans

STATE_TTL = 3600.0  # GitHub's code is good for an hour; so is the state that asks for it
MAX_STATES = 16  # visits of `/` whose callback is still awaited
LOCAL_HOST_RE = re.compile(r"^(127\.0\.0\.1|localhost)(:\d{1,5})?$", re.IGNORECASE)


class States:
    """The `state` values handed out: each good for one callback, until it expires."""

    def __init__(self, ttl: float, clock: Callable[[], float]) -> None:
        self.ttl = ttl
        self.clock = clock
        self._expiry: dict[str, float] = {}

    def issue(self) -> str:
        now = self.clock()
        live = sorted((t, s) for s, t in self._expiry.items() if t > now)[-(MAX_STATES - 1) :]
        self._expiry = {s: t for t, s in live}
        state = secrets.token_urlsafe(16)
        self._expiry[state] = now + self.ttl
        return state

    def redeem(self, state: str) -> bool:
        """True once for a state handed out less than `ttl` seconds ago."""
        expiry = self._expiry.pop(state, None)
        return expiry is not None and expiry > self.clock()


def security_headers(web_url: str) -> dict[str, str]:
    """The page runs no script and loads nothing; its one form posts to GitHub."""
    parts = urlsplit(web_url)
    github = f"{parts.scheme}://{parts.netloc}"
    return {
        "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
        f"form-action 'self' {github}; frame-ancestors 'none'; base-uri 'none'",
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",  # the callback's code and state stay here
        "Cache-Control": "no-store",
    }


def build_setup_app(
    *,
    plan: Registration,
    web_url: str,
    api_url: str,
    env_path: Path,
    first_issue: str,
    on_done: Callable[[dict[str, Any]], None] = lambda _data: None,
    extra_env: dict[str, str] | None = None,
    state_ttl: float = STATE_TTL,
    clock: Callable[[], float] = time.monotonic,
) -> Flask:
    """The local page: `/` shows `plan` and starts the flow, `/callback` finishes it and
    writes the App's credentials (and `extra_env`) to `env_path`; `first_issue` is the last
    of the next steps it shows."""
    app = Flask(__name__, template_folder="templates")
    app.add_template_filter(code_spans, "code_spans")
    states = States(state_ttl, clock)
    manifest = json.dumps(plan.manifest())
    headers = security_headers(web_url)

    def message(status: int, heading: str, text: str) -> tuple[str, int]:
        return render_template("setup_message.html", heading=heading, message=text), status

    @app.before_request
    def this_machine_only() -> tuple[str, int] | None:
        if not LOCAL_HOST_RE.match(request.host or ""):
            return message(
                421, "Wrong address", "This setup page answers only at http://127.0.0.1/."
            )
        return None

    @app.after_request
    def _headers(response: Response) -> Response:
        response.headers.update(headers)
        return response

    @app.get("/")
    def start() -> str:
        return render_template(
            "setup.html",
            plan=plan,
            action=plan.new_app_url(web_url, states.issue()),
            manifest=manifest,
            hook_unreachable=unreachable_from_github(plan.webhook_url),
            env_path=env_path.resolve(),
        )

    @app.get("/callback")
    def callback() -> tuple[str, int]:
        if not states.redeem(request.args.get("state", "")):
            return message(
                400,
                "Not this setup's answer",
                "This answer does not belong to this setup, was used already, or came too "
                "late. Start again from the setup page.",
            )
        code = request.args.get("code", "")
        if not code:
            return message(400, "No code", "GitHub sent no code.")
        try:
            data = exchange_code(api_url, code)
            values = {**env_values_from_conversion(data), **(extra_env or {})}
            merge_env_file(env_path, values)
        except SetupError as exc:
            return message(500, "Nothing was written", str(exc))
        on_done(data)
        page = render_template(
            "setup_done.html",
            plan=plan,
            app_name=str(data.get("slug") or data.get("name") or data["id"]),
            app_id=data["id"],
            app_page=data.get("html_url") or "",
            env_path=env_path.resolve(),
            written=[(key, WRITTEN_KEYS.get(key, "set by this setup")) for key in values],
            install=install_url(web_url, data),
            first_issue=first_issue,
        )
        return page, 200

    return app
