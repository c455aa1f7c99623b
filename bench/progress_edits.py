#!/usr/bin/env python3
"""Progress-comment edits per minute under streaming sessions.

The App (its spawner API, inbox worker and progress publisher, SQLite) and a fake GitHub on
127.0.0.1; --items running work items whose spawner reports `session.usage` for each every
--interval seconds, as a gateway under a streaming session would (it reports every 5 s; the
default here is ten times as often), for --seconds. Each report makes the item's progress
comment due; the publisher edits it at most once per 10 s per item. Prints the edits of each
item's comment per minute and the reports per minute that caused them.
Target: at most 6 edits per minute per item.
Usage: bench/progress_edits.py [--items N] [--seconds S] [--interval S]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.store.tables import WorkItemStatus  # noqa: E402
from tests.fakes.github_api import generate_private_key_pem  # noqa: E402
from tests.spawnerapi_support import serve_api  # noqa: E402

TARGET = 6.0  # edits per minute per item: one per 10 s
EDIT = re.compile(r"/issues/comments/(\d+)$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--interval", type=float, default=0.5)
    args = parser.parse_args()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    served = contextlib.contextmanager(serve_api)
    with (
        tempfile.TemporaryDirectory() as tmp,
        served("sqlite", Path(tmp), generate_private_key_pem()) as api,
    ):
        items = [api.work_item(n, status=WorkItemStatus.RUNNING) for n in range(1, args.items + 1)]
        spawner = api.spawner(api.token())
        reports = 0
        start = time.monotonic()
        while time.monotonic() - start < args.seconds:
            batch = [
                {
                    "event": "session.usage",
                    "work_item_id": item,
                    "id": uuid.uuid4().hex,
                    "input_tokens": 1200,
                    "output_tokens": 40,
                    "cache_read_input_tokens": 9000,
                    "requests": 1,
                }
                for item in items
            ]
            answer = spawner.events(*batch)
            assert answer.status_code == 200 and answer.json()["accepted"] == len(items)
            reports += len(items)
            time.sleep(args.interval)
        elapsed = time.monotonic() - start
        edits = Counter(
            match.group(1)
            for call in api.fake.calls("PATCH", r"/issues/comments/\d+$")
            if (match := EDIT.search(call.path))
        )
    minutes = elapsed / 60
    per_item = sorted(count / minutes for count in edits.values())
    rate = reports / minutes / args.items
    print(f"{args.items} items, {elapsed:.0f} s, {rate:.0f} usage reports/min per item")
    print(
        "progress-comment edits/min per item: "
        + ", ".join(f"{rate:.1f}" for rate in per_item)
        + f" (max {max(per_item, default=0):.1f}, {len(edits)} comments edited)"
    )
    ok = bool(per_item) and max(per_item) <= TARGET
    print(f"target ≤ {TARGET:.0f} edits/min per item: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
