"""A fake Slack Web API on loopback: the methods the mirror calls, answered in Slack's shapes.

It checks the bearer token (`invalid_auth` otherwise, as Slack answers with HTTP 200),
validates the Block Kit limits the mirror must respect (so an oversized element fails here
as it would on Slack), records every call, and can be told to fail: `fail_next` for one
answer, `outage(status)` until `recover()`, with `Retry-After` on 429s.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from flask import Flask, Response, jsonify, request

BOT_USER = "U0BOTUSER1"
BOT_ID = "B0BOTID01"
TEAM = "T0TEAM0001"
OPTION_LIMITS = {"checkboxes": 10, "radio_buttons": 10, "static_select": 100}


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    status: int


@dataclass
class Outage:
    status: int
    headers: dict[str, str]
    body: str


def block_problems(blocks: Any) -> list[str]:
    """What Slack would reject in `blocks` (the limits the mirror relies on)."""
    if blocks is None:
        return []
    if not isinstance(blocks, list) or len(blocks) > 50:
        return ["blocks must be a list of at most 50"]
    problems: list[str] = []
    for index, block in enumerate(blocks):
        kind = block.get("type")
        text = (block.get("text") or {}).get("text", "")
        if kind == "section" and len(text) > 3000:
            problems.append(f"block {index}: section text over 3000 characters")
        elements = block.get("elements") or []
        if kind == "input":
            elements = [block.get("element") or {}]
            if not block.get("label", {}).get("text"):
                problems.append(f"block {index}: input without a label")
        for element in elements:
            limit = OPTION_LIMITS.get(element.get("type", ""))
            options = element.get("options") or []
            if limit is not None and not 0 < len(options) <= limit:
                problems.append(f"block {index}: {element['type']} with {len(options)} options")
            values = [o.get("value") for o in options]
            for option in options:
                if len(option.get("text", {}).get("text", "")) > 75:
                    problems.append(f"block {index}: option text over 75 characters")
            for chosen in element.get("initial_options") or []:
                if chosen not in options:
                    problems.append(f"block {index}: initial option not among the options")
            initial = element.get("initial_option")
            if initial is not None and initial not in options:
                problems.append(f"block {index}: initial option not among the options")
            if len(set(values)) != len(values):
                problems.append(f"block {index}: duplicate option values")
            if element.get("type") == "button" and "url" in element and not element["url"]:
                problems.append(f"block {index}: button with an empty url")
    return problems


@dataclass
class FakeSlack:
    """State of the fake workspace: messages by channel and ts, reactions, ephemerals."""

    token: str = "xoxb-test-token"
    app_token: str = "xapp-test-token"  # Socket Mode's app-level token
    socket_url: str = ""  # what apps.connections.open hands out
    messages: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    ephemerals: list[dict[str, Any]] = field(default_factory=list)
    views: list[dict[str, Any]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    revoked: bool = False
    delays: dict[str, float] = field(default_factory=dict)  # method -> seconds before answering
    _failures: list[tuple[str, Outage]] = field(default_factory=list)
    _outage: Outage | None = None
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- what tests set up and read -------------------------------------------------------
    def fail_next(
        self, method: str, status: int, retry_after: int | None = None, error: str | None = None
    ) -> None:
        """The next call of `method` answers `status` (429 carries `Retry-After`); `error`
        sets Slack's error code instead (Slack reports most errors with HTTP 200)."""
        outage = self._failure(status, retry_after)
        if error is not None:
            outage = Outage(status, outage.headers, json.dumps({"ok": False, "error": error}))
        self._failures.append((method, outage))

    def outage(self, status: int = 500, retry_after: int | None = None) -> None:
        """Every call fails with `status` until `recover()`."""
        self._outage = self._failure(status, retry_after)

    def recover(self) -> None:
        self._outage = None

    @staticmethod
    def _failure(status: int, retry_after: int | None) -> Outage:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        if status == 429:
            return Outage(status, headers, '{"ok": false, "error": "ratelimited"}')
        if status == 502:
            return Outage(status, headers, "<html><body>502 Bad Gateway</body></html>")
        return Outage(status, headers, '{"ok": false, "error": "fatal_error"}')

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        return [m for m in self.messages if channel is None or m["channel"] == channel]

    def thread(self, ts: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("thread_ts") == ts]

    def method_calls(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def _next_ts(self) -> str:
        with self._lock:
            return f"1770000000.{next(self._ts):06d}"

    # --- the WSGI app ---------------------------------------------------------------------
    def wsgi(self) -> Flask:
        app = Flask("fake-slack")

        def ok(**fields: Any) -> Response:
            return jsonify(ok=True, **fields)

        def error(code: str) -> Response:
            return jsonify(ok=False, error=code)

        def args() -> dict[str, Any]:
            data: dict[str, Any] = dict(request.args)
            data.update(request.form.to_dict())
            data.update(request.get_json(silent=True) or {})
            return data

        def injected(method: str) -> Outage | None:
            for index, (name, outage) in enumerate(self._failures):
                if name == method:
                    del self._failures[index]
                    return outage
            return self._outage

        def authorized(method: str) -> str | None:
            auth = request.headers.get("Authorization", "")
            if self.revoked:
                return "token_revoked"
            expected = self.app_token if method == "apps.connections.open" else self.token
            if auth != f"Bearer {expected}":
                return "invalid_auth"
            return None

        handlers = {
            "auth.test": lambda a: ok(
                url="https://fake.slack.com/",
                team="Fake",
                user="the-loop",
                team_id=TEAM,
                user_id=BOT_USER,
                bot_id=BOT_ID,
                is_enterprise_install=False,
            ),
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._ephemeral,
            "reactions.add": self._react,
            "views.open": self._open_view,
            "apps.connections.open": lambda a: ok(url=self.socket_url),
        }

        @app.post("/api/<method>")
        def api(method: str) -> Response:
            data = args()
            outage = injected(method)
            if outage is not None:
                self.calls.append(Call(method, data, outage.status))
                return Response(
                    outage.body, outage.status, outage.headers, mimetype="application/json"
                )
            self.calls.append(Call(method, data, 200))
            time.sleep(self.delays.get(method, 0.0))
            if (denied := authorized(method)) is not None:
                return error(denied)
            handler = handlers.get(method)
            if handler is None:
                return error("unknown_method")
            result: Response = handler(data)  # type: ignore[operator]
            return result

        return app

    def _blocks(self, data: dict[str, Any]) -> tuple[Any, list[str]]:
        blocks = data.get("blocks")
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        return blocks, block_problems(blocks)

    def _post_message(self, data: dict[str, Any]) -> Response:
        blocks, problems = self._blocks(data)
        if problems:
            return jsonify(ok=False, error="invalid_blocks", errors=problems)
        if not data.get("channel"):
            return jsonify(ok=False, error="channel_not_found")
        ts = self._next_ts()
        message = {
            "channel": data["channel"],
            "ts": ts,
            "thread_ts": data.get("thread_ts"),
            "text": data.get("text", ""),
            "blocks": blocks,
        }
        self.messages.append(message)
        return jsonify(ok=True, channel=data["channel"], ts=ts, message=message)

    def _update(self, data: dict[str, Any]) -> Response:
        blocks, problems = self._blocks(data)
        if problems:
            return jsonify(ok=False, error="invalid_blocks", errors=problems)
        self.updates.append(
            {
                "channel": data.get("channel"),
                "ts": data.get("ts"),
                "text": data.get("text"),
                "blocks": blocks,
            }
        )
        return jsonify(ok=True, channel=data.get("channel"), ts=data.get("ts"))

    def _ephemeral(self, data: dict[str, Any]) -> Response:
        self.ephemerals.append(
            {
                "channel": data.get("channel"),
                "user": data.get("user"),
                "text": data.get("text"),
                "thread_ts": data.get("thread_ts"),
            }
        )
        return jsonify(ok=True, message_ts=self._next_ts())

    def _open_view(self, data: dict[str, Any]) -> Response:
        view = data.get("view")
        if isinstance(view, str):
            view = json.loads(view)
        if not data.get("trigger_id") or not isinstance(view, dict):
            return jsonify(ok=False, error="invalid_arguments")
        problems = block_problems(view.get("blocks"))
        if problems:
            return jsonify(ok=False, error="invalid_blocks", errors=problems)
        opened = {**view, "id": f"V{len(self.views) + 1:08d}"}
        self.views.append(opened)
        return jsonify(ok=True, view=opened)

    def _react(self, data: dict[str, Any]) -> Response:
        key = (data.get("channel"), data.get("timestamp"), data.get("name"))
        if any((r["channel"], r["timestamp"], r["name"]) == key for r in self.reactions):
            return jsonify(ok=False, error="already_reacted")
        self.reactions.append(
            {
                "channel": data.get("channel"),
                "timestamp": data.get("timestamp"),
                "name": data.get("name"),
            }
        )
        return jsonify(ok=True)
