"""The App's doors under strangers' traffic, over real HTTP against `the-loop serve`
(gunicorn's asgi worker, as deployed): credentials before bodies, bounded and timed bodies,
slow clients that hold no thread, and floods that cost a counter.

Timings are printed, never asserted against the clock: what is asserted is that an answer
comes at all while the slow clients are still waiting (`bench/edges.py` tracks the figures).
"""

from __future__ import annotations

import socket
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from app.fleet.tokens import create_token
from app.ingress.doors import SPAWNER_MAX_BODY
from app.ingress.sampling import FIELD_LIMIT, PER_MINUTE, SUMMARY
from app.protocol import StopJob
from app.store.jobqueue import queue_job
from app.store.tables import Delivery, Event, InboxState, WorkItem, WorkItemStatus
from tests.support import (
    RunningApp,
    fixture_json,
    forked_workers,
    hold_open_bodies,
    memory_kib,
    post_webhook,
    served_app,
    wait_for,
    wsgi_app,
)

pytestmark = pytest.mark.sqlite_only

SLOW_CLIENTS = 64
REPO = "Codertocat/Hello-World"


def spawner_with_a_job(app: RunningApp) -> str:
    """A spawner token, and a stop job waiting for it."""
    item = f"github:{REPO}#1"
    with app.state.sessions() as db, db.begin():
        token = create_token(db, "devbox", [REPO])
        db.add(WorkItem(id=item, repo_full_name=REPO, issue_number=1, state=WorkItemStatus.RUNNING))
        db.flush()
        queue_job(db, "stop:edges", StopJob(work_item_id=item, repo=REPO, reason="test"))
    return token


def open_request(url: str, path: str, headers: dict[str, str], first: bytes = b"") -> socket.socket:
    """A request whose headers (and `first` bytes of body) are sent, the rest never."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + first)
    return sock


def answered(sock: socket.socket, timeout: float = 0.0) -> bytes:
    """What the server has sent on `sock` so far (waiting up to `timeout` for something)."""
    sock.settimeout(timeout) if timeout else sock.setblocking(False)
    try:
        return sock.recv(65536)
    except (BlockingIOError, TimeoutError):
        return b""


def slow_clients(url: str, token: str) -> list[socket.socket]:
    """Clients that announce a body and send one byte of it: authenticated spawners, Slack
    requests with fresh signature headers, and webhook senders."""
    stamp = str(int(time.time()))
    doors: list[tuple[str, dict[str, str]]] = [
        ("/spawner/v1/events", {"Authorization": f"Bearer {token}"}),
        (
            "/slack/events",
            {"X-Slack-Signature": "v0=" + "0" * 64, "X-Slack-Request-Timestamp": stamp},
        ),
        ("/github/webhooks", {"X-GitHub-Event": "issues"}),
    ]
    socks = []
    for n in range(SLOW_CLIENTS):
        path, headers = doors[n % len(doors)]
        socks.append(open_request(url, path, {**headers, "Content-Length": "4096"}, b"{"))
    return socks


def test_slow_bodies_hold_no_thread_healthz_and_a_claim_still_answer(settings_env):
    with served_app(settings_env) as app:
        token = spawner_with_a_job(app)
        socks = slow_clients(app.url, token)
        try:
            time.sleep(0.5)  # every slow request is in, waiting for its body
            started = time.monotonic()
            health = httpx.get(f"{app.url}/healthz", timeout=10)
            healthz_s = time.monotonic() - started
            started = time.monotonic()
            claim = httpx.get(
                f"{app.url}/spawner/v1/jobs",
                params={"wait": 0},
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
            )
            claim_s = time.monotonic() - started
            waiting = sum(1 for sock in socks if answered(sock) == b"")
        finally:
            for sock in socks:
                sock.close()
    print(
        f"\n{SLOW_CLIENTS} slow bodies open: /healthz {healthz_s * 1000:.0f} ms, "
        f"claim {claim_s * 1000:.0f} ms (target < 1000 ms each)"
    )
    assert health.status_code == 200
    assert claim.status_code == 200 and claim.json()["job"]["kind"] == "stop"
    assert waiting == SLOW_CLIENTS  # they were all still open while both answered


def test_a_body_that_misses_its_deadline_is_answered_408(settings_env):
    with served_app({**settings_env, "THE_LOOP_BODY_DEADLINE": "1"}) as app:
        token = spawner_with_a_job(app)
        spawner = open_request(
            app.url,
            "/spawner/v1/events",
            {"Authorization": f"Bearer {token}", "Content-Length": "50"},
        )
        hook = open_request(app.url, "/github/webhooks", {"Content-Length": "50"}, b"{")
        try:
            for sock in (spawner, hook):
                head = wait_for(lambda s=sock: answered(s, 0.5), timeout=30)
                assert head.startswith(b"HTTP/1.1 408"), head
        finally:
            spawner.close()
            hook.close()


@pytest.mark.parametrize("front", ["serve", "wsgi"])
def test_spawner_routes_check_the_token_before_reading_a_body(settings_env, front):
    big = str(2 * 1024 * 1024)
    with (served_app if front == "serve" else wsgi_app)(settings_env) as app:
        token = spawner_with_a_job(app)
        if front == "serve":  # the answer comes while the body is still unsent
            for headers, status in (
                ({"Content-Length": big}, b"401"),
                ({"Content-Length": big, "Authorization": "Bearer tlsp_forged"}, b"401"),
                ({"Content-Length": big, "Authorization": f"Bearer {token}"}, b"413"),
            ):
                sock = open_request(app.url, "/spawner/v1/events", headers, b"{")
                try:
                    head = answered(sock, 10)
                finally:
                    sock.close()
                assert head.startswith(b"HTTP/1.1 " + status), head
        client = httpx.Client(base_url=f"{app.url}/spawner/v1", timeout=30)
        body = b"[" + b"0," * SPAWNER_MAX_BODY + b"0]"
        assert client.post("/events", content=body).status_code == 401
        bearer = {"Authorization": f"Bearer {token}"}
        assert client.post("/events", content=body, headers=bearer).status_code == 413

        def chunks() -> Iterator[bytes]:  # no Content-Length to refuse up front
            for _ in range(20):
                yield b" " * 65536

        assert client.post("/events", content=chunks(), headers=bearer).status_code == 413
        assert client.post("/events", json={"events": []}, headers=bearer).status_code == 200


# What one sampled row may cost: its line in events.jsonl and its row in the events table
# with the table's indexes (fields are cut, so a row has a ceiling).
ROW_BYTES = 2048
PAGE_SLACK = 4 * 4096  # SQLite grows by whole pages, per table and index


def store_size(app_env: dict[str, str]) -> int:
    """Bytes of the SQLite database (its WAL folded in first) and of events.jsonl."""
    db = Path(app_env["DATABASE_URL"].split("///", 1)[1])
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    jsonl = Path(app_env["THE_LOOP_STATE_DIR"]) / "events.jsonl"
    return db.stat().st_size + (jsonl.stat().st_size if jsonl.exists() else 0)


def forge(url: str, count: int) -> float:
    """`count` webhooks with a wrong signature and 8 KB header values, over one connection;
    returns the seconds they took."""
    host, port = url.removeprefix("http://").split(":")
    request = (
        f"POST /github/webhooks HTTP/1.1\r\nHost: {host}\r\nX-GitHub-Event: {'e' * 8000}\r\n"
        f"X-GitHub-Delivery: {'d' * 8000}\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n"
        "Content-Length: 2\r\n\r\n{}"
    ).encode()
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        for _ in range(count):
            sock.sendall(request)
            seen = b""
            while b'"signature does not match"}' not in seen:
                data = sock.recv(65536)
                assert data, "the server closed the connection"
                seen += data
    return time.monotonic() - started


def stored_events(engine: Any) -> list[dict[str, Any]]:
    with Session(engine) as session:
        return [row.data for row in session.scalars(select(Event).order_by(Event.id))]


def test_a_flood_of_forged_webhooks_costs_a_counter_not_rows(settings_env):
    """Every refusal is counted; rows are a few per minute whatever the count, with the
    sender's header values cut (`test_sampling` takes the full 100,000 through the same
    counter into a real store; `bench/edges.py` floods the server with them)."""
    count = 5000
    with served_app(settings_env) as app:
        rows_before = len(stored_events(app.state.engine))
        app.state.engine.dispose()
        before = store_size(settings_env)
        started = time.time()
        seconds = forge(app.url, count)
        minutes = int(time.time() // 60) - int(started // 60) + 1
    app.state.engine.dispose()
    grown = store_size(settings_env) - before  # after shutdown: the last summary is written
    events = stored_events(app.state.engine)[rows_before:]
    print(
        f"\n{count} forged webhooks in {seconds:.1f} s ({count / seconds:,.0f}/s) over "
        f"{minutes} minute window(s): {len(events)} rows, store grew {grown:,} bytes"
    )
    samples = [e for e in events if e["event"] == "webhook.rejected"]
    summaries = [e for e in events if e["event"] == SUMMARY]
    assert len(samples) <= PER_MINUTE * minutes and len(summaries) <= minutes
    assert len(events) == len(samples) + len(summaries)
    assert sum(s["counts"].get("bad-signature", 0) for s in summaries) == count
    assert all(len(e["delivery"]) == len(e["gh_event"]) == FIELD_LIMIT for e in samples)
    assert grown <= len(events) * ROW_BYTES + PAGE_SLACK


def token_lookups(engine: Any) -> list[str]:
    """Every statement `engine` runs that looks a spawner token up, as it runs."""
    seen: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def _count(_conn: Any, _cursor: Any, statement: str, *_rest: Any) -> None:
        if "spawners.token_hash =" in statement:
            seen.append(statement)

    return seen


def test_a_spawner_call_looks_its_token_up_once_at_the_door_and_once_in_its_transaction(
    settings_env,
):
    """Behind the ASGI front the Flask door trusts the front's lookup; as plain WSGI the
    Flask door makes it. Either way the endpoint authenticates again where it acts."""
    import asyncio

    from app.config.process_settings import load_settings
    from app.runtime.asgi import create_asgi_app
    from app.runtime.flask_app import create_app

    settings = load_settings(settings_env, dotenv=None)
    front = create_asgi_app(settings)
    with front.state.sessions() as db, db.begin():
        token = create_token(db, "devbox", [REPO])
    bearer = {"Authorization": f"Bearer {token}"}

    async def whoami(headers: dict[str, str]) -> int:
        transport = httpx.ASGITransport(app=front)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            return (await client.get("/spawner/v1/whoami", headers=headers)).status_code

    lookups = token_lookups(front.state.engine)
    assert asyncio.run(whoami(bearer)) == 200
    assert len(lookups) == 2
    assert asyncio.run(whoami({"Authorization": "Bearer tlsp_forged"})) == 401
    assert len(lookups) == 3  # refused by the front, before Flask
    front.state.close()

    flask_app = create_app(settings)
    state = flask_app.extensions["the-loop"]
    lookups = token_lookups(state.engine)
    with flask_app.test_client() as client:
        assert client.get("/spawner/v1/whoami", headers=bearer).status_code == 200
        assert len(lookups) == 2
        assert client.get("/spawner/v1/whoami").status_code == 401
        assert (
            client.get("/spawner/v1/whoami", headers={"Authorization": "Bearer x"}).status_code
            == 401
        )
    state.close()


HELD_BODIES = 30
HELD_SIZE = 24 * 1024 * 1024
RSS_BOUND_KIB = 64 * 1024


def still_open(sock: socket.socket) -> bool:
    """True while the server has neither answered on `sock` nor closed it."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # an answer, or b"" once closed
    except BlockingIOError:
        return True
    except OSError:
        pass  # reset: refused and closed
    return False


def handled(engine: Any) -> int:
    with Session(engine) as session:
        return len(session.scalars(select(Delivery).where(Delivery.state == InboxState.DONE)).all())


def test_strangers_bodies_held_open_cost_at_most_the_budget(settings_env):
    """Thirty unsigned webhooks declaring 24 MiB each, every one a byte short: the App
    reads what its budget for unverified bodies holds and answers the rest 503 at once, so
    its worker's memory stays bounded; `/healthz` and a real delivery are answered meanwhile
    and the refusals cost a counter."""
    with served_app(settings_env) as app:
        assert app.pid is not None
        worker = wait_for(lambda: forked_workers(app.pid), timeout=30)[0]
        comment = fixture_json("github/issue_comment.created.json")
        # the first delivery loads what handling one needs: counted before, not against
        assert post_webhook(app.url, "issue_comment", comment).status_code == 202
        wait_for(lambda: handled(app.state.engine) == 1, timeout=30)
        before = memory_kib(worker)
        socks = hold_open_bodies(app.url, "/github/webhooks", HELD_BODIES, HELD_SIZE)
        try:
            started = time.monotonic()
            health = httpx.get(f"{app.url}/healthz", timeout=30)
            healthz_s = time.monotonic() - started
            delivery = post_webhook(app.url, "issue_comment", {**comment, "again": True})
            peak = memory_kib(worker, "VmHWM")
            now = memory_kib(worker)
            held = sum(still_open(sock) for sock in socks)
        finally:
            for sock in socks:
                sock.close()
    print(
        f"\n{HELD_BODIES} x {HELD_SIZE >> 20} MiB unsigned bodies held: worker RSS "
        f"{before >> 10} -> {now >> 10} MiB (peak {peak >> 10} MiB), {held} being read, "
        f"/healthz {healthz_s * 1000:.0f} ms"
    )
    assert health.status_code == 200
    assert delivery.status_code == 202  # room is left for the deliveries GitHub sends
    assert 1 <= held < HELD_BODIES  # some are read: the bound is not "refuse everything"
    assert peak - before <= RSS_BOUND_KIB
    summaries = [e for e in stored_events(app.state.engine) if e["event"] == SUMMARY]
    assert sum(s["counts"].get("busy", 0) for s in summaries) == HELD_BODIES - held


def test_bodies_behind_a_token_have_a_budget_of_their_own(settings_env):
    """A session is not trusted either: its token lets it hold bodies open only up to a
    budget of their own, past which it gets 503; claims (no body) and `/healthz` still
    answer."""
    with served_app({**settings_env, "THE_LOOP_BODY_DEADLINE": "600"}) as app:
        token = spawner_with_a_job(app)
        headers = {"Authorization": f"Bearer {token}", "Content-Length": str(SPAWNER_MAX_BODY)}
        socks = [open_request(app.url, "/spawner/v1/events", headers, b"{") for _ in range(40)]
        heads = [b""] * len(socks)

        def refused() -> bool:
            for n, sock in enumerate(socks):
                heads[n] = heads[n] or answered(sock)
            return sum(h.startswith(b"HTTP/1.1 503") for h in heads) >= 40 - 32

        try:
            wait_for(refused, timeout=60)
            time.sleep(0.5)
            refused()  # nothing more is refused: the rest are being read
            health = httpx.get(f"{app.url}/healthz", timeout=30)
            claim = httpx.get(
                f"{app.url}/spawner/v1/jobs",
                params={"wait": 0},
                headers={"Authorization": f"Bearer {token}"},
                timeout=30,
            )
        finally:
            for sock in socks:
                sock.close()
    busy = [h for h in heads if h.startswith(b"HTTP/1.1 503")]
    assert len(busy) == 40 - 32 and all(b"retry-after: 10" in h.lower() for h in busy)
    assert heads.count(b"") == 32  # the rest are being read
    assert health.status_code == 200 and claim.status_code == 200
