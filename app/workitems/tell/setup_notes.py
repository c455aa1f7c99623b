"""The repository's set-up as the App keeps it: the facts of the last one on the item (its
state, time, exit status, command and output's tail), what the progress comment and the
status page say while it runs (`setting up (2:31)`), and the one comment a failed set-up
leaves on the issue: the command, its exit status and the output's tail.

The command and the output are the repository's words: bounded, stripped of anything that
could pass for the App's marker or notify someone, and fenced so no line of theirs closes
the fence.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from githubkit.exception import GitHubException

from app.gate import MarkerKind, marker
from app.github import GitHubNotConfigured, IssueIO, Services
from app.store import WorkItem
from app.workitems.tell.endings import _fenced, _quiet

log = logging.getLogger(__name__)

SETUP_EVENTS = frozenset(
    {
        "session.setup_started",
        "session.setup_running",
        "session.setup_finished",
        "session.setup_failed",
    }
)
FAILED = "session.setup_failed"
MAX_TAIL = 3000  # characters of the output's tail kept and shown
MAX_COMMAND = 500
SETUP_KEY = "setup"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _seconds(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def clock(seconds: float) -> str:
    """`2:31` for 151 seconds (pure)."""
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def setup_facts(name: str, fields: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The item's set-up record after event `name` (pure)."""
    facts = dict(current) if name != "session.setup_started" else {}
    if name == "session.setup_started":
        facts = {"state": "running", "seconds": 0.0, "source": str(fields.get("source") or "")}
    elif name == "session.setup_running":
        facts.update(state="running", seconds=_seconds(fields.get("seconds")))
    else:
        facts.update(
            state="failed" if name == FAILED else "done",
            seconds=_seconds(fields.get("seconds")),
            exit_status=_int(fields.get("exit_status")),
            warm=bool(fields.get("warm")),
            command=str(fields.get("command") or "")[:MAX_COMMAND],
            tail=str(fields.get("tail") or fields.get("error") or "")[-MAX_TAIL:],
        )
    return facts


def setup_words(session: Mapping[str, Any]) -> str:
    """`setting up (2:31)` while the item's set-up runs, else "" (pure)."""
    setup = session.get(SETUP_KEY)
    if not isinstance(setup, Mapping) or setup.get("state") != "running":
        return ""
    return f"setting up ({clock(_seconds(setup.get('seconds')))})"


def failure_text(work_item_id: str, key: str, fields: Mapping[str, Any]) -> str:
    """The comment a failed set-up leaves (pure)."""
    facts = setup_facts(FAILED, fields, {})
    command = _quiet(facts["command"]) or "(none)"
    if fields.get("timed_out"):
        how = f"ran out of time after {clock(facts['seconds'])}"
    elif facts["exit_status"] is not None:
        how = f"exited with status {facts['exit_status']}"
    else:
        how = "could not be run"
    step = _quiet(str(fields.get("step") or ""))[:100]
    lines = [
        "### the-loop: the repository's set-up failed",
        "",
        f"The set-up{f' (`{step}`)' if step else ''} {how}, so no session was started.",
        "",
        "**Command:**",
        *_fenced(command),
        "",
    ]
    output = _quiet(facts["tail"].rstrip())
    if output:
        lines += ["**The output's last lines:**", *_fenced(output), ""]
    else:
        lines += ["**Output:** none", ""]
    lines += [
        "Fix the set-up (`.devcontainer/devcontainer.json` or `.the-loop/setup`) or the "
        "devbox's `routing.setup`, then `the-loop execute` tries again.",
        "",
        marker(MarkerKind.NOTICE, item=work_item_id, setup=key),
    ]
    return "\n".join(lines) + "\n"


def apply_setup_event(
    services: Services, item: WorkItem, name: str, fields: Mapping[str, Any]
) -> None:
    """Keep the set-up's facts on `item`; a failure posts its comment once."""
    current = (item.session or {}).get(SETUP_KEY) or {}
    item.session = {**(item.session or {}), SETUP_KEY: setup_facts(name, fields, current)}
    if name != FAILED or item.installation_id is None:
        return
    key = str(fields.get("id") or fields.get("reported_ts") or "")[:64]
    io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
    try:
        io.post_once(failure_text(item.id, key, fields), MarkerKind.NOTICE, item=item.id, setup=key)
    except (GitHubException, GitHubNotConfigured) as exc:  # the progress comment still says it
        log.warning("set-up failure comment on %s failed: %s", item.id, exc)
        services.events.emit("setup.comment_failed", item.id, error=str(exc)[:500])
