"""The stop gate's attempt counts for a session, kept by the App where the session cannot
write them (pure).

The gate runs inside the session's sandbox, so anything it could write the session could
write too: a count in the session's home could be filled in ahead and let every turn end.
So a session's gate asks the App (`POST /spawner/v1/gate`, with the session's token) which
attempt this is, and the App keeps the count on the work item: it starts again at 1 on every
move of the App's own pointer (a new `epoch`) and for every node the gate names, and grows
at most once every `gap` seconds of the App's clock — a burst of asks counts once, so the
count cannot be run up ahead of the turns it stands for.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

KEY = "gate"  # where the count is kept in the work item's session facts


def next_attempt(
    kept: Mapping[str, Any] | None, epoch: int, node: str, now: datetime, gap: float
) -> tuple[int, dict[str, Any]]:
    """The attempt the gate is at now, and the record to keep."""
    record = dict(kept or {})
    fresh = record.get("epoch") != epoch or record.get("node") != node
    attempts = 0 if fresh else _count(record.get("attempts"))
    last = None if fresh else _time(record.get("at"))
    if attempts and last is not None and now - last < timedelta(seconds=gap):
        return attempts, record  # asked again too soon: the same attempt, not a new one
    attempts += 1
    return attempts, {"epoch": epoch, "node": node, "attempts": attempts, "at": now.isoformat()}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 0


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
