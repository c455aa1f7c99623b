"""A session that ends short of review says on the issue what was tried: one comment per
launch with the phase reached, how it ended, the agent's last message, the files changed on
its branch and the usage the model gateway counted.

The last message and the file names come from the session's own transcript and checkout, so
they are the session's words: cut, stripped of anything that could pass for the App's marker
or notify someone, and shown inside a code fence no line of theirs can close. The comment is
keyed by the launch it reports (`ended=<when it started>`), so a repeated report, or an exit
and a stop of the same launch, post it once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from githubkit.exception import GitHubException

from app.gate import (
    MarkerKind,
    branch_url,
    code_text,
    defuse,
    defuse_mentions,
    markdown_link,
    marker,
    repository_url,
)
from app.github import GitHubNotConfigured, IssueIO, Services
from app.graph import NODE_NAMES
from app.store import WorkItem, WorkItemStatus
from app.workitems.spend.budgets import SYNTAX

log = logging.getLogger(__name__)

ENDING_EVENTS = frozenset({"session.exited", "session.stopped"})
REVIEW_NODE = "review"
BUDGET_REASON = "budget"  # a stop job's reason when the item's budget ran out
MAX_MESSAGE = 3000
MAX_FILES_SHOWN = 50
# What the spawner's `limit` field means (`routing.sandbox.limits`); any other value is dropped.
LIMIT_WORDS = {
    "memory": "killed at its memory limit (`routing.sandbox.limits.memory`)",
    "processes": "its forks refused at its process limit (`routing.sandbox.limits.processes`)",
    "disk": "stopped past its disk limit (`routing.sandbox.limits.disk`)",
}
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_FENCE_RUN_RE = re.compile(r"`{3,}|~{3,}")


def short_of_review(phase: str, status: str) -> bool:
    """Whether an item whose pointer is at `phase` had not yet reached review (pure)."""
    if status == WorkItemStatus.DONE:
        return False
    if phase not in NODE_NAMES:
        return True
    return NODE_NAMES.index(phase) < NODE_NAMES.index(REVIEW_NODE)


@dataclass(frozen=True)
class Ending:
    """What the comment says, read off the item and the ending event."""

    work_item_id: str
    launch: str  # which launch ended (when it started): the comment's key
    phase: str
    how: str  # "exited" | "stopped"
    exit_status: int | None = None
    reason: str = ""  # why it was stopped
    limit: str = ""  # the devbox limit the session met (`LIMIT_WORDS`), as its spawner saw
    last_message: str = ""
    changed_base: str = ""
    changed_files: Sequence[str] | None = None  # None: not known
    uncommitted_files: Sequence[str] = ()  # changed in the checkout, never committed
    usage: str = ""  # the usage line (workitems/spend/costs.py) once the gateway counted any
    budget: str = ""  # the budget line, for a session its budget stopped
    capped: bool = False  # … a daily or monthly spend cap, that is
    branch: str = ""
    branch_url: str = ""
    pull_request: Mapping[str, Any] = field(default_factory=dict)


def _quiet(text: str) -> str:
    """The session's words with no marker, no mention and no control character (pure)."""
    return defuse_mentions(defuse(_CONTROL_RE.sub("", text)))


def _fenced(text: str) -> list[str]:
    """`text` in a code fence longer than any fence-like run inside it (pure)."""
    longest = max((len(run) for run in _FENCE_RUN_RE.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", text, fence]


def _how(ending: Ending) -> str:
    limit = f", {LIMIT_WORDS[ending.limit]}," if ending.limit in LIMIT_WORDS else ""
    if ending.how == "stopped":
        why = f" ({ending.reason.replace('-', ' ')})" if ending.reason else ""
        return f"was **stopped**{why}{limit}"
    status = f" with status {ending.exit_status}" if ending.exit_status is not None else ""
    return f"**exited**{status}{limit}"


def _listed(names: Sequence[str]) -> list[str]:
    shown = [f"- {code_text(_quiet(name)[:200])}" for name in names[:MAX_FILES_SHOWN]]
    more = len(names) - MAX_FILES_SHOWN
    return shown + ([f"- … and {more} more"] if more > 0 else [])


def _files(ending: Ending) -> list[str]:
    where = markdown_link(ending.branch, ending.branch_url) if ending.branch else "its branch"
    against = f" (since it left `{ending.changed_base}`)" if ending.changed_base else ""
    if ending.changed_files is None:
        lines = [f"**Files changed on {where}:** unknown (git could not say)"]
    elif not ending.changed_files:
        lines = [f"**Files changed on {where}**{against}: none committed"]
    else:
        lines = [f"**Files changed on {where}**{against}:", *_listed(ending.changed_files)]
    if ending.uncommitted_files:
        lines += ["", "**Changed but not committed:**", *_listed(ending.uncommitted_files)]
    return lines


def _usage(usage: str) -> str:
    return usage or "**Usage:** not counted for this session"


def _budget_lines(ending: Ending) -> list[str]:
    """Where a budget-stopped item's work is and how it goes on."""
    where = [markdown_link(ending.branch, ending.branch_url)] if ending.branch else []
    pr = ending.pull_request
    if pr.get("number"):
        where.append(f"pull request [#{pr['number']}]({pr.get('html_url', '')})")
    return [
        "",
        ending.budget,
        f"**Where the work is:** {' and '.join(where) if where else 'its checkout on the devbox'}",
        (
            "**To go on:** an authorized person comments `the-loop budget` here, which lifts "
            "the spend caps of this repository until 00:00 UTC"
            if ending.capped
            else f"**To go on:** an authorized person comments `the-loop budget +<amount>` "
            f"here ({SYNTAX})"
        )
        + "; the session is then relaunched where it left off.",
    ]


def ending_text(ending: Ending) -> str:
    """The comment for a session that ended short of review (pure)."""
    phase = f"`{ending.phase}`" if ending.phase else "its first phase"
    budget = ending.how == "stopped" and ending.reason == BUDGET_REASON
    lines = [
        "### the-loop: the session ended before review"
        + (": its budget is spent" if budget else ""),
        "",
        f"The session {_how(ending)} at phase {phase}.",
        "",
    ]
    message = _quiet(ending.last_message.strip())
    if len(message) > MAX_MESSAGE:
        message = "…" + message[-(MAX_MESSAGE - 1) :]
    if message:
        lines += ["**Its last message:**", *_fenced(message), ""]
    else:
        lines += ["**Its last message:** none found in its transcript", ""]
    lines += [*_files(ending), "", _usage(ending.usage)]
    pr = ending.pull_request
    if budget:
        lines += _budget_lines(ending)
    elif pr.get("number"):
        lines.append(f"**Pull request:** [#{pr['number']}]({pr.get('html_url', '')})")
    if ending.how == "exited":
        lines += ["", "A comment here relaunches the session where it left off."]
    lines += [
        "",
        marker(MarkerKind.NOTICE, item=ending.work_item_id, ended=ending.launch),
    ]
    return "\n".join(lines) + "\n"


def _files_of(fields: Mapping[str, Any], key: str) -> list[str] | None:
    files = fields.get(key)
    if not isinstance(files, list):
        return None
    return [str(f) for f in files[:200]]


def ending_of(item: WorkItem, name: str, fields: Mapping[str, Any]) -> Ending:
    """The ending a `session.exited` / `session.stopped` event reports (pure)."""
    status = fields.get("exit_status")
    branch = item.branch or ""
    return Ending(
        work_item_id=item.id,
        launch=str(fields.get("started_at") or fields.get("session_id") or "")[:64],
        phase=item.phase or "",
        how="stopped" if name == "session.stopped" else "exited",
        exit_status=status if isinstance(status, int) and not isinstance(status, bool) else None,
        reason=str(fields.get("reason") or "")[:64] if name == "session.stopped" else "",
        limit=str(fields.get("limit")) if fields.get("limit") in LIMIT_WORDS else "",
        last_message=str(fields.get("last_message") or ""),
        changed_base=str(fields.get("changed_base") or "")[:64],
        changed_files=_files_of(fields, "changed_files"),
        uncommitted_files=_files_of(fields, "uncommitted_files") or [],
        branch=branch,
        branch_url=branch_url(repository_url(item.html_url or ""), branch),
        pull_request=dict(item.pull_request or {}),
        capped=bool((item.budget or {}).get("capped")) and bool((item.budget or {}).get("spent")),
    )


def report_ending(
    services: Services,
    item: WorkItem,
    name: str,
    fields: Mapping[str, Any],
    usage: str = "",
    budget: str = "",
) -> None:
    """Post the ending comment once, when the session ended short of review; `usage` is the
    item's usage line, `budget` its budget line."""
    if name not in ENDING_EVENTS or item.installation_id is None:
        return
    if not short_of_review(item.phase or "", item.state):
        return
    if name == "session.stopped" and fields.get("reason") == "complete":
        return
    ending = replace(ending_of(item, name, fields), usage=usage, budget=budget)
    io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
    try:
        io.post_once(ending_text(ending), MarkerKind.NOTICE, item=item.id, ended=ending.launch)
    except (GitHubException, GitHubNotConfigured) as exc:  # the progress comment still shows it
        log.warning("ending comment on %s failed: %s", item.id, exc)
        services.events.emit("ending.failed", item.id, error=str(exc)[:500])
