"""How the status page words what it shows (pure): ages, a session's health, code spans,
a work item's usage.

A session's health comes from its work item's status, which the spawner's watchdog keeps
honest (`session.stalled`, `session.exited`); it never says "running" for a session that
is stalled or gone. A session whose spawner went silent is `lost` once the App's sweep
counts the spawner dead (`app.fleet.liveness`); until the sweep has run, a running one whose
spawner is already past the dead window is shown as unconfirmed rather than running.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from app.fleet import is_dead
from app.store import WorkItemStatus, aware
from app.workitems import setup_words, usage_line

S = WorkItemStatus
DEAD_AFTER = timedelta(seconds=30)  # the setting's default; the page passes the setting
MISSING = "—"


def ago(moment: datetime | None, now: datetime) -> str:
    """`42s ago`, `5m ago`, `3h ago`, `2d 16h ago`; `—` when there is no moment."""
    moment = aware(moment)
    if moment is None:
        return MISSING
    seconds = int((now - moment).total_seconds())
    if seconds < 0:
        return "just now"
    if seconds < 60:
        return f"{seconds}s ago"
    if seconds < 3600:
        return f"{seconds // 60}m ago"
    if seconds < 86400:
        return f"{seconds // 3600}h ago"
    days, hours = divmod(seconds // 3600, 24)
    return f"{days}d {hours}h ago" if hours else f"{days}d ago"


@dataclass(frozen=True)
class Health:
    """What the page shows for a work item's session: a label, a tone (CSS), a note."""

    label: str
    tone: str  # ok | busy | warn | bad | idle
    note: str = ""


_TONES: dict[str, str] = {
    S.PARKED: "idle",
    S.UNLABELED: "idle",
    S.FROZEN: "busy",
    S.SPAWNING: "busy",
    S.RUNNING: "ok",
    S.STALLED: "bad",
    S.EXITED: "warn",
    S.STOPPED: "idle",
    S.CLOSED: "idle",
    S.DONE: "ok",
    S.PR_CLOSED: "warn",  # its pull request closed unmerged: a human decides what next
    S.LOST: "bad",  # its spawner went silent: a human decides what next
}


def session_health(
    status: str,
    *,
    stall_screen: str | None = None,
    stall_hint: str | None = None,
    failure: str | None = None,
    spawner: str | None = None,
    spawner_seen: datetime | None = None,
    setup: Mapping[str, object] | None = None,
    now: datetime,
    dead_after: timedelta = DEAD_AFTER,
) -> Health:
    """The health shown for a work item in `status` (pure); `setup` is the item's last
    set-up record (`setup_notes`): its time while it runs, its exit and last line when it
    failed."""
    if status == S.STALLED:
        screen = f"waiting at {stall_screen}" if stall_screen else "waiting on the screen"
        return Health("stalled", "bad", f"{screen}: {stall_hint}" if stall_hint else screen)
    if status == S.EXITED and failure:
        return Health("exited", "bad", f"could not start: {failure}{_setup_tail(setup)}")
    if status == S.EXITED:
        return Health("exited", "warn", "the session process ended")
    seen = aware(spawner_seen)
    if status == S.LOST:
        where = f"spawner {spawner} last seen {ago(seen, now)}" if spawner else "its spawner"
        return Health("lost", "bad", f"{where}; execute again to rerun it")
    silent = is_dead(seen, now, dead_after)
    setting_up = setup_words({"setup": setup}) if setup else ""
    if status in (S.FROZEN, S.SPAWNING) and setting_up and not silent:
        return Health("setting up", "busy", setting_up)
    if status in (S.RUNNING, S.SPAWNING) and spawner and silent:
        note = f"last known {status}; spawner {spawner} last seen {ago(seen, now)}"
        return Health("unconfirmed", "warn", note)
    return Health(str(status), _TONES.get(status, "idle"))  # a StrEnum key matches its text


def _setup_tail(setup: Mapping[str, object] | None) -> str:
    """A failed set-up's exit status and last output line, for a launch's failure."""
    if not setup or setup.get("state") != "failed":
        return ""
    lines = [line for line in str(setup.get("tail") or "").splitlines() if line.strip()]
    last = f"; its last line: {lines[-1][:200]}" if lines else ""
    return f" (set-up exit status {setup.get('exit_status')}{last})"


def code_spans(text: str) -> Markup:
    """`text` escaped, its `backticked` parts shown as code: one sentence reads the same in a
    terminal (backticks) and on a page (code)."""
    parts = str(escape(text)).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: show the text as it is
        return Markup(escape(text))
    return Markup(
        "".join(f"<code>{part}</code>" if i % 2 else part for i, part in enumerate(parts))
    )


def usage_words(counts: Mapping[str, int], cost: float | None, minutes: float | None) -> str:
    """A work item's usage on the status page (pure): tokens, cost, model requests, the
    tool calls they asked for and its sessions' time; "" before it used the model."""
    if not any(counts.values()):
        return ""
    words = usage_line(counts, cost, minutes).removeprefix("**Usage:** ")
    head, _, tail = words.partition(" requests")
    calls = counts.get("tool_calls", 0)
    return f"{head} requests · {calls} tool call{'' if calls == 1 else 's'}{tail}"
