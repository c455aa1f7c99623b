"""`the-loop events`: print the audit trail; `the-loop inbox`: deliveries and their state,
and `--reconcile`, one pass over GitHub's delivery log."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def matches(record: dict[str, Any], work_item_id: str | None, event: str | None) -> bool:
    if work_item_id and record.get("work_item_id") != work_item_id:
        return False
    return not (
        event
        and record.get("event") != event
        and not str(record.get("event", "")).startswith(event + ".")
    )


def _follow(path: Path, poll: float = 0.5) -> Iterator[dict[str, Any]]:
    with path.open() as fh:
        fh.seek(0, 2)
        while True:
            line = fh.readline()
            if not line:
                time.sleep(poll)
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def _print(records: Iterable[dict[str, Any]], as_json: bool) -> int:
    if as_json:
        count = 0
        for record in records:
            sys.stdout.write(json.dumps(record) + "\n")
            sys.stdout.flush()
            count += 1
        return count
    table = Table("time", "event", "work item", "details", box=None, pad_edge=False)
    rows = 0
    for record in records:
        details = {k: v for k, v in record.items() if k not in ("ts", "event", "work_item_id")}
        table.add_row(
            str(record.get("ts", ""))[:19],
            str(record.get("event", "")),
            str(record.get("work_item_id") or ""),
            json.dumps(details, separators=(",", ":"))[:200],
        )
        rows += 1
    Console().print(table)
    return rows


def run_events(args: argparse.Namespace) -> int:
    from app.audit import read_jsonl
    from app.config import load_settings

    path = Path(args.file) if args.file else load_settings().events_path
    if not path.exists() and not args.follow:
        print(f"the-loop: no events yet ({path})", file=sys.stderr)
        return 0
    records = (r for r in read_jsonl(path) if matches(r, args.work_item_id, args.event))
    if args.follow:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
        if not args.json:
            args.json = True  # a live tail prints one line per event
        _print(records, True)
        _print((r for r in _follow(path) if matches(r, args.work_item_id, args.event)), True)
        return 0
    _print(records, args.json)
    return 0


def run_inbox(args: argparse.Namespace) -> int:
    from sqlalchemy import select

    from app.config import load_settings
    from app.github import utcnow
    from app.store import Delivery, Sessions, make_engine, migrate, requeue

    settings = load_settings()
    engine = make_engine(settings.database_url)
    migrate(engine)
    if args.retry:
        ok = requeue(engine, args.retry, utcnow())
        print("requeued" if ok else f"the-loop: no parked delivery {args.retry}")
        return 0 if ok else 1
    if args.prune:
        return _prune(engine, settings)
    if args.reconcile:
        return _reconcile(engine, settings)
    with Sessions(engine)() as session:
        query = select(Delivery).order_by(Delivery.id.desc()).limit(args.limit)
        if args.state:
            query = query.where(Delivery.state == args.state)
        rows = list(session.scalars(query))
    table = Table(
        "delivery", "event", "state", "origin", "attempts", "received", "last error", box=None
    )
    for row in rows:
        event = f"{row.event}.{row.action}" if row.action else row.event
        table.add_row(
            row.delivery_id,
            event,
            row.state,
            row.origin,
            str(row.attempts),
            row.received_at.isoformat()[:19],
            (row.last_error or "")[:80],
        )
    Console().print(table)
    return 0


def _prune(engine: Any, settings: Any) -> int:
    from app.github import utcnow
    from app.runtime import retention_of
    from app.store import prune

    retention = retention_of(settings)
    pruned = prune(engine, retention, utcnow())
    table = Table("removed", "count", "older than", box=None)
    table.add_row("done deliveries' bodies", str(pruned.bodies), _days(retention.bodies))
    table.add_row("done deliveries (dedupe keys)", str(pruned.deliveries), _days(retention.dedupe))
    table.add_row("events", str(pruned.events), _days(retention.events))
    table.add_row(
        "spawner event ids", str(pruned.spawner_event_ids), _days(retention.spawner_event_ids)
    )
    Console().print(table)
    return 0


def _reconcile(engine: Any, settings: Any) -> int:
    """One pass over GitHub's delivery log now; what it stored is handled by the App's
    workers (or `the-loop worker --drain`)."""
    from app.audit import EventLog
    from app.github import GitHubApp, IngestWriter, Reconciler, utcnow
    from app.runtime import build_router

    github = GitHubApp(settings)
    if not github.configured:
        print("the-loop: GITHUB_APP_ID and GITHUB_PRIVATE_KEY are needed to read the log")
        return 2
    events = EventLog(settings.events_path, engine)
    ingest = IngestWriter(engine, events, build_router().routes)
    try:
        reconciler = Reconciler(settings, engine, github, ingest, events, utcnow, one_pass=True)
        counts = reconciler.run_pass()
    finally:
        ingest.close()
    if counts is None:
        waiting = reconciler.resumes_at
        if waiting is not None:
            print(f"the-loop: GitHub asked to wait until {waiting.isoformat()}")
        elif settings.the_loop_ingress == "pull":
            print("the-loop: the App is reading the delivery log already (pull mode)")
        else:
            print("the-loop: another process is reading the delivery log; try again shortly")
        return 1
    print(
        f"recovered {counts.recovered} of {counts.missing} missing deliveries "
        f"({counts.listed} log entries read, {counts.duplicates} stored meanwhile, "
        f"{counts.refused} refused, {counts.requests} requests to GitHub)"
    )
    if not counts.complete:
        why = counts.error or ("rate limited" if counts.rate_limited else "budget spent")
        print(f"the-loop: the pass stopped early ({why}); the next one goes on from here")
    return 0 if counts.error is None else 1


def _days(age: Any) -> str:
    return f"{age.total_seconds() / 86400:g} days"


def register(subparsers: Any) -> None:
    events = subparsers.add_parser("events", help="print the event log")
    events.add_argument("--follow", "-f", action="store_true", help="keep printing new events")
    events.add_argument("--work-item", dest="work_item_id", help="only this work item")
    events.add_argument("--event", help="only this event (or family, e.g. 'session')")
    events.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    events.add_argument("--file", help="read this events.jsonl instead of the state dir's")
    events.set_defaults(func=run_events)

    inbox = subparsers.add_parser(
        "inbox", help="list webhook deliveries (requeue a parked one, prune old rows)"
    )
    inbox.add_argument("--state", choices=["queued", "done", "parked"])
    inbox.add_argument("--limit", type=int, default=50)
    inbox.add_argument("--retry", metavar="DELIVERY", help="requeue a parked delivery")
    inbox.add_argument(
        "--prune",
        action="store_true",
        help="remove what is past its retention now (THE_LOOP_RETAIN_*_DAYS) and say what",
    )
    inbox.add_argument(
        "--reconcile",
        action="store_true",
        help="read GitHub's delivery log now and store what the inbox missed",
    )
    inbox.set_defaults(func=run_inbox)
