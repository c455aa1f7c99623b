"""The fake GitHub's webhook delivery log, as the REST API documents it.

`HookLog.deliver` plays GitHub sending one webhook: it POSTs the signed body to the App's
URL (when there is one) and records the attempt with its outcome, as GitHub does whether
the POST succeeded or not. `GET /app/hook/deliveries` (App JWT) lists the attempts newest
first, `per_page` at a time (30 by default, at most 100), the next page named by a `cursor`
in the `Link` header; `GET /app/hook/deliveries/{id}` adds `request.headers`,
`request.payload` and the response. Both answer with the `X-RateLimit-*` headers of an
hourly budget (`limit`); `fail_next` on the fake injects 429s and 403s in front of them.
"""

from __future__ import annotations

import base64
import itertools
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from flask import Flask, Response, jsonify, request
from githubkit.webhooks import sign

HOOK_ID = 4_000_001


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cursor(entry_id: int) -> str:
    return base64.urlsafe_b64encode(f"before:{entry_id}".encode()).decode().rstrip("=")


def _before(cursor: str) -> int | None:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        return int(text.removeprefix("before:"))
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass
class HookLog:
    """Every delivery attempt, oldest first, with what was sent."""

    app_id: int
    secret: str
    limit: int = 5000
    used: int = 0  # requests to the log this hour
    entries: list[dict[str, Any]] = field(default_factory=list)
    sent: dict[int, dict[str, Any]] = field(default_factory=dict)  # id → request + response
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(12_000_000_001))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def deliver(
        self,
        event: str,
        payload: dict[str, Any],
        url: str | None = None,
        *,
        guid: str | None = None,
        redelivery: bool = False,
    ) -> dict[str, Any]:
        """Send `payload` as GitHub would: POST it to `url` (None: the App cannot be
        reached) and log the attempt. Returns the log entry."""
        guid = guid or str(uuid.uuid4())
        body = orjson.dumps(payload)
        headers = {
            "Accept": "*/*",
            "Content-Type": "application/json",
            "User-Agent": "GitHub-Hookshot/fake",
            "X-GitHub-Delivery": guid,
            "X-GitHub-Event": event,
            "X-GitHub-Hook-ID": str(HOOK_ID),
            "X-GitHub-Hook-Installation-Target-ID": str(self.app_id),
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-Hub-Signature-256": sign(self.secret, body),
        }
        status, code, answer = "failed to connect to host", 0, ""
        started = datetime.now(UTC)
        if url is not None:
            try:
                resp = httpx.post(url, content=body, headers=headers, timeout=10)
                code, answer = resp.status_code, resp.text
                status = "OK" if resp.is_success else f"Invalid HTTP Response: {code}"
            except httpx.HTTPError:
                pass
        action = payload.get("action")
        installation = payload.get("installation") or {}
        repository = payload.get("repository") or {}
        with self._lock:
            entry = {
                "id": next(self._ids),
                "guid": guid,
                "delivered_at": _iso(started),
                "redelivery": redelivery,
                "duration": (datetime.now(UTC) - started).total_seconds(),
                "status": status,
                "status_code": code,
                "event": event,
                "action": action if isinstance(action, str) else None,
                "installation_id": installation.get("id"),
                "repository_id": repository.get("id"),
                "throttled_at": None,
            }
            self.entries.append(entry)
            self.sent[entry["id"]] = {
                "request": {"headers": headers, "payload": payload},
                "response": {"headers": {"Content-Type": "application/json"}, "payload": answer},
            }
        return entry

    def redeliver(self, entry: dict[str, Any], url: str | None) -> dict[str, Any]:
        """Another attempt at a logged delivery: same guid and payload, a new entry."""
        with self._lock:
            sent = self.sent[entry["id"]]["request"]
        return self.deliver(
            entry["event"], sent["payload"], url, guid=entry["guid"], redelivery=True
        )

    def rate_headers(self) -> dict[str, str]:
        with self._lock:
            self.used += 1
            used = self.used
        reset = int(datetime.now(UTC).timestamp()) + 3600
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(0, self.limit - used)),
            "X-RateLimit-Used": str(used),
            "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Resource": "core",
        }

    def routes(self, app: Flask, require_app_jwt: Any) -> None:
        @app.get("/app/hook/deliveries")
        def list_deliveries():  # type: ignore[no-untyped-def]
            if (denied := require_app_jwt()) is not None:
                return denied
            try:
                per_page = min(100, max(1, int(request.args.get("per_page", 30))))
            except ValueError:
                return jsonify(message="per_page must be a number"), 422
            cursor = request.args.get("cursor")
            before = _before(cursor) if cursor else None
            if cursor and before is None:
                return jsonify(message="Invalid cursor"), 422
            with self._lock:
                newest_first = [dict(e) for e in reversed(self.entries)]
            if before is not None:
                newest_first = [e for e in newest_first if e["id"] < before]
            page, rest = newest_first[:per_page], newest_first[per_page:]
            response = jsonify(page)
            response.headers.update(self.rate_headers())
            if rest:
                base = request.base_url
                next_url = f"{base}?per_page={per_page}&cursor={_cursor(page[-1]['id'])}"
                response.headers["Link"] = f'<{next_url}>; rel="next"'
            return response

        @app.get("/app/hook/deliveries/<int:entry_id>")
        def one_delivery(entry_id: int):  # type: ignore[no-untyped-def]
            if (denied := require_app_jwt()) is not None:
                return denied
            with self._lock:
                entry = next((dict(e) for e in self.entries if e["id"] == entry_id), None)
                sent = self.sent.get(entry_id)
            if entry is None or sent is None:
                response = Response('{"message": "Not Found"}', 404, mimetype="application/json")
            else:
                url = f"{request.url_root.rstrip('/')}/app/hook/deliveries/{entry_id}"
                response = jsonify({**entry, "url": url, **sent})
            response.headers.update(self.rate_headers())
            return response
