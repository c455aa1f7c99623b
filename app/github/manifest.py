"""GitHub's App manifest flow, served as a local page by `the-loop setup`.

The page posts `manifest.yaml` (with this deployment's URLs filled in) to GitHub; GitHub
redirects back with a one-hour `code`, which is exchanged at
`POST /app-manifests/{code}/conversions` for the App id, PEM, webhook secret and client
credentials. Those are merged into `.env` (mode 0600). An unreadable `.env` is never replaced.

The page answers only requests addressed to this machine (`Host: 127.0.0.1` or `localhost`,
any port): a web page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) can
neither read a `state` nor finish the flow with an App of its own. Each visit of `/` gets a
fresh `state`, good for one callback within `STATE_TTL` seconds.
"""

from __future__ import annotations

import html
import json
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from dotenv import dotenv_values
from flask import Flask, request
from githubkit import GitHub

from app.files import write_text_atomic

MANIFEST_PATH = Path(__file__).resolve().parents[2] / "manifest.yaml"
STATE_TTL = 3600.0  # GitHub's code is good for an hour; so is the state that asks for it
MAX_STATES = 16  # visits of `/` whose callback is still awaited
# Where a pull-mode App's webhooks "go": GitHub logs a delivery only when it tries one, and
# the App reads it from the log. `.invalid` never resolves (RFC 2606), so no third party
# ever receives a payload.
PULL_WEBHOOK_URL = "https://the-loop.invalid/github/webhooks"
LOCAL_HOST_RE = re.compile(r"^(127\.0\.0\.1|localhost)(:\d{1,5})?$", re.IGNORECASE)


class SetupError(RuntimeError):
    """The manifest flow cannot continue; the message says what to do."""


def build_manifest(
    base: dict[str, Any], webhook_url: str, redirect_url: str, name: str | None
) -> dict[str, Any]:
    manifest = json.loads(json.dumps(base))
    manifest.setdefault("hook_attributes", {})["url"] = webhook_url
    manifest["redirect_url"] = redirect_url
    if name:
        manifest["name"] = name
    return manifest


def new_app_url(web_url: str, org: str | None, state: str) -> str:
    root = web_url.rstrip("/")
    path = f"/organizations/{org}/settings/apps/new" if org else "/settings/apps/new"
    return f"{root}{path}?state={state}"


def env_values_from_conversion(data: dict[str, Any]) -> dict[str, str]:
    """The `.env` lines a conversion answer provides."""
    return {
        "GITHUB_APP_ID": str(data["id"]),
        "GITHUB_PRIVATE_KEY": data["pem"].replace("\n", "\\n"),
        "GITHUB_WEBHOOK_SECRET": data["webhook_secret"],
        "GITHUB_CLIENT_ID": data.get("client_id") or "",
        "GITHUB_CLIENT_SECRET": data.get("client_secret") or "",
    }


def merge_env_file(path: Path, updates: dict[str, str]) -> None:
    """Merge `updates` into the dotenv file at `path`, atomically, mode 0600.

    Existing keys not in `updates` are kept. A file that exists but cannot be read is left
    untouched and reported.
    """
    existing: dict[str, str] = {}
    if path.exists():
        try:
            path.read_text()
            existing = {k: v for k, v in dotenv_values(path).items() if v is not None}
        except (OSError, UnicodeDecodeError) as exc:
            raise SetupError(
                f"{path} exists but cannot be read ({exc}); not overwriting it"
            ) from exc
    merged = {**existing, **updates}
    lines = [f"{key}={json.dumps(value)}" for key, value in merged.items()]
    write_text_atomic(path, "\n".join(lines) + "\n", 0o600)


def exchange_code(api_url: str, code: str) -> dict[str, Any]:
    """Trade the redirect's code for the new App's credentials."""
    github = GitHub(base_url=api_url.rstrip("/") + "/")
    resp = github.rest.apps.create_from_manifest(code)
    return json.loads(resp.content)


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


def build_setup_app(
    *,
    manifest: dict[str, Any],
    web_url: str,
    api_url: str,
    env_path: Path,
    org: str | None = None,
    on_done: Callable[[dict[str, Any]], None] = lambda _data: None,
    extra_env: dict[str, str] | None = None,
    state_ttl: float = STATE_TTL,
    clock: Callable[[], float] = time.monotonic,
) -> Flask:
    """The local page: `/` starts the flow, `/callback` finishes it and writes the App's
    credentials (and `extra_env`) to `env_path`."""
    app = Flask("the-loop-setup")
    states = States(state_ttl, clock)

    @app.before_request
    def this_machine_only() -> tuple[str, int] | None:
        if not LOCAL_HOST_RE.match(request.host or ""):
            return "<p>This setup page answers only at http://127.0.0.1/ (or localhost).</p>", 421
        return None

    @app.get("/")
    def start() -> str:
        action = html.escape(new_app_url(web_url, org, states.issue()))
        value = html.escape(json.dumps(manifest))
        return (
            "<!doctype html><title>the-loop setup</title>"
            "<h1>Register the-loop as a GitHub App</h1>"
            f'<form id="manifest" method="post" action="{action}">'
            f'<input type="hidden" name="manifest" value="{value}">'
            '<button type="submit">Create the GitHub App</button></form>'
        )

    @app.get("/callback")
    def callback() -> tuple[str, int]:
        if not states.redeem(request.args.get("state", "")):
            return (
                "<p>This answer does not belong to this setup, was used already, or came "
                "too late. Start again from <a href='/'>the setup page</a>.</p>",
                400,
            )
        code = request.args.get("code", "")
        if not code:
            return "<p>GitHub sent no code.</p>", 400
        try:
            data = exchange_code(api_url, code)
            merge_env_file(env_path, {**env_values_from_conversion(data), **(extra_env or {})})
        except SetupError as exc:
            return f"<p>{html.escape(str(exc))}</p>", 500
        on_done(data)
        name = html.escape(str(data.get("slug") or data.get("name") or data["id"]))
        link = html.escape(str(data.get("html_url", "")))
        return (
            f"<p>Registered <a href='{link}'>{name}</a> (App id {data['id']}). "
            f"Credentials written to {html.escape(str(env_path))}. Install the App on your "
            "repositories from its page, then run <code>the-loop up</code>.</p>",
            200,
        )

    return app


def load_manifest(path: Path = MANIFEST_PATH) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise SetupError(f"{path}: the manifest must be a mapping")
    return data
