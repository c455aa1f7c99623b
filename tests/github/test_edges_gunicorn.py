"""The App's doors as plain WSGI under a real `gunicorn -k gthread 'app.runtime:create_app()'`:
the body budget and the body deadline hold there as under `the-loop serve`
(`app.ingress.wsgi_doors`). Thirty unsigned 24 MiB webhooks held open cost the worker at
most the budget, the rest answered 503 at once; a body over its door's limit is 413 before
it is read; a body that stops coming is 408; and `/healthz` answers meanwhile.

Timings are printed, never asserted against the clock (`bench/edges.py --front gthread`
tracks the figures).
"""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from tests.support import (
    fixture_json,
    forked_workers,
    gunicorn_app,
    hold_open_bodies,
    memory_kib,
    post_webhook,
    wait_for,
)

pytestmark = pytest.mark.sqlite_only

THREADS = 8
HELD_BODIES = 30
HELD_SIZE = 24 * 1024 * 1024
RSS_BOUND_KIB = 64 * 1024
PROBES = 6
HEALTHZ_SECONDS = 15.0  # generous: a probe that waits for a thread waits far longer


def status_of(sock: socket.socket, timeout: float = 30.0) -> int:
    """The status the server answered on `sock` with (0 when it closed without one)."""
    sock.setblocking(True)
    sock.settimeout(timeout)
    try:
        head = sock.recv(64)
    except OSError:
        return 0
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0


def open_request(url: str, path: str, headers: dict[str, str], first: bytes) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + first)
    return sock


def test_held_bodies_cost_at_most_the_budget_and_healthz_answers(settings_env):
    with gunicorn_app(settings_env, THREADS) as app:
        assert app.pid is not None
        worker = wait_for(lambda: forked_workers(app.pid), timeout=30)[0]
        comment = fixture_json("github/issue_comment.created.json")
        assert post_webhook(app.url, "issue_comment", comment).status_code == 202
        before = memory_kib(worker)
        socks = hold_open_bodies(app.url, "/github/webhooks", HELD_BODIES, HELD_SIZE)
        try:
            answered = []
            for _ in range(PROBES):
                started = time.monotonic()
                health = httpx.get(f"{app.url}/healthz", timeout=HEALTHZ_SECONDS)
                answered.append((health.status_code, time.monotonic() - started))
            peak = memory_kib(worker, "VmHWM")
            statuses = [status_of(sock, 1.0) for sock in socks]
        finally:
            for sock in socks:
                sock.close()
    busy = statuses.count(503)
    print(
        f"\ngthread: {HELD_BODIES} x {HELD_SIZE >> 20} MiB unsigned bodies held: worker peak "
        f"{before >> 10} -> {peak >> 10} MiB, {busy} answered 503, /healthz "
        + ", ".join(f"{s * 1000:.0f} ms" for _, s in answered)
    )
    assert [code for code, _ in answered] == [200] * PROBES
    assert busy >= HELD_BODIES - 2  # the budget holds one such body at once (two at most)
    assert peak - before <= RSS_BOUND_KIB


def test_a_body_over_its_doors_limit_is_413_and_one_that_stops_is_408(settings_env):
    env = {**settings_env, "THE_LOOP_BODY_DEADLINE": "2"}
    with gunicorn_app(env, THREADS) as app:
        big = str(26 * 1024 * 1024)
        over = open_request(app.url, "/github/webhooks", {"Content-Length": big}, b"{")
        slack = open_request(
            app.url,
            "/slack/events",
            {
                "Content-Length": str(2 * 1024 * 1024),
                "X-Slack-Signature": "v0=" + "0" * 64,
                "X-Slack-Request-Timestamp": str(int(time.time())),
            },
            b"{",
        )
        stopped = open_request(app.url, "/github/webhooks", {"Content-Length": "50"}, b"{")
        try:
            assert status_of(over) == 413
            assert status_of(slack) == 413
            assert status_of(stopped, 60) == 408
            assert httpx.get(f"{app.url}/healthz", timeout=HEALTHZ_SECONDS).status_code == 200
        finally:
            for sock in (over, slack, stopped):
                sock.close()
