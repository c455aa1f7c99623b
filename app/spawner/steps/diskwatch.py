"""A session's disk bound (`routing.sandbox.limits.disk`): what it writes in its checkout and
its home is measured from the host every few seconds, and a session past the bound is
stopped; its end then says `limit: disk`, as a memory kill says `limit: memory`.

A session's `/tmp` is a tmpfs of its own, made no larger than the bound by bubblewrap
(`SandboxPlan.tmp_size`), so it cannot outgrow it whatever the watch sees. The checkout and
the home lie on the host's disk (the one the App's database may share): no per-session
filesystem or project quota is assumed of the devbox, so a watch is the one mechanism that
holds everywhere. Between two looks a session can write what the disk takes in
`DISK_INTERVAL` seconds beyond the bound; the look is a bounded walk that follows no link
(`hostwalk.measure`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from app.spawner.confine.hostwalk import measure
from app.spawner.confine.sessionhome import home_for
from app.spawner.naming import item_slug

if TYPE_CHECKING:
    from app.spawner.context import SpawnerContext
    from app.spawner.registry import SessionRecord

DISK = "disk"
DISK_INTERVAL = 3.0  # seconds between two measures of every live session
log = logging.getLogger(__name__)


def over_limit(used: int, limit: int | None) -> bool:
    """Is `used` bytes past `limit` (None: no bound)? (pure)"""
    return limit is not None and used > limit


def used_by(checkout: Path, home: Path) -> int:
    """Bytes the session's checkout and home hold on disk."""
    return measure(checkout).bytes + measure(home).bytes


def _home_of(ctx: SpawnerContext, record: SessionRecord) -> Path:
    return home_for(ctx.state_dir, item_slug(record.work_item_id))


def look_once(ctx: SpawnerContext) -> list[str]:
    """Measure every live session; stop those past the bound. Returns the work items
    stopped."""
    limit = ctx.config.routing.sandbox.limits.disk
    if limit is None:
        return []
    stopped: list[str] = []
    for seen in ctx.registry.all():
        if not seen.live or not seen.checkout:
            continue
        used = used_by(Path(seen.checkout), _home_of(ctx, seen))
        if not over_limit(used, int(limit)):
            continue
        with ctx.locks.try_hold(seen.work_item_id) as held:
            record = ctx.registry.get(seen.work_item_id) if held else None
            if record is None or not record.live or record.started_at != seen.started_at:
                continue  # a job is acting on it, or it was relaunched since the look
            ctx.disk.mark(record.work_item_id, used)
            ctx.events.emit(
                "session.disk_limit",
                record.work_item_id,
                level="warning",
                used=used,
                limit=int(limit),
                message=f"the session wrote {used} bytes, past routing.sandbox.limits.disk "
                f"({int(limit)}): it is stopped",
            )
            ctx.runner.kill(record.tmux_session, owner=record.work_item_id)
            stopped.append(record.work_item_id)
    return stopped


def watch(ctx: SpawnerContext, stop: threading.Event, interval: float = DISK_INTERVAL) -> None:
    """`look_once` every `interval` seconds until `stop` is set (the spawner's thread)."""
    while not stop.wait(interval):
        try:
            look_once(ctx)
        except Exception:  # one failed look must not end the watch
            log.exception("disk watch failed")
