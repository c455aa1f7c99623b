"""The progress comment as Markdown (pure): one comment per work item, edited in place.

It shows every phase (done / current / waiting on a human / skipped / ahead), the frozen
harness, model and effort, the session's state — never "running" for a session that waits
on a prompt or has ended — the artifacts the session reported, each linked to its file on the
work branch, the branch and the pull request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.gate import MarkerKind, defuse, markdown_link, marker, work_links
from app.store import WorkItemStatus
from app.workitems.decide.walk import PhaseState, Walk, phase_rows
from app.workitems.spend.post_rate import THROTTLED_NOTE

S = WorkItemStatus
ICONS: Mapping[PhaseState, str] = {
    PhaseState.DONE: "✅",
    PhaseState.CURRENT: "▶️",
    PhaseState.WAITING: "⏳",
    PhaseState.SKIPPED: "⏭️",
    PhaseState.AHEAD: "·",
}
SESSION_WORDS: Mapping[str, str] = {
    S.FROZEN: "queued for a spawner",
    S.SPAWNING: "starting",
    S.RUNNING: "running",
    S.STALLED: "stalled",
    S.EXITED: "exited (a follow-up relaunches it)",
    S.STOPPED: "stopped",
    S.DONE: "done",
    S.PR_CLOSED: "stopped: the pull request was closed unmerged (reopen it, or execute again)",
    S.LOST: (
        "lost: its spawner went silent, so nobody watches the session (it runs again when "
        "the spawner comes back with it alive, or when someone authorized executes again)"
    ),
}


@dataclass(frozen=True)
class ProgressView:
    """What the comment shows, read off the work item's record."""

    work_item_id: str
    status: str
    walk: Walk
    harness: str = ""
    model: str = ""
    effort: str = ""
    stall: str = ""  # the screen a stalled session waits on
    stall_hint: str = ""
    failure: str = ""  # why the last launch failed, while the item waits exited
    artifacts: Sequence[str] = ()
    spec_id: str = ""
    pull_request: Mapping[str, Any] = field(default_factory=dict)
    approve_keyword: str = "the-loop approve"
    changes_keyword: str = "the-loop changes"
    notes: Sequence[str] = ()
    usage: str = ""  # the usage line (workitems/spend/costs.py), once the session used the model
    budget: str = ""  # the budget line (workitems/spend/spending.py), when a budget is configured
    budget_spent: bool = False  # stopped because its budget ran out
    capped: bool = False  # … its repository's daily or monthly spend cap, that is
    unsandboxed: bool = False  # the devbox runs sessions without the sandbox (`mode: none`)
    shared_network: bool = False  # the sandbox shares the devbox's network (`network: host`)
    setting_up: str = ""  # `setting up (2:31)` while the repository's set-up runs
    queued: tuple[int, int] | None = None  # (k, n): its place among items waiting to launch
    held: str = ""  # why a spend cap holds it in line: `daily budget reached (resets …)`
    branch: str = ""  # the branch its session works on
    page: str = ""  # the (or pull request's) page: where the repository's links start
    throttled: bool = False  # some of the session's comments were refused: it posted too fast


UNSANDBOXED_NOTE = (
    "> [!WARNING]\n> This session runs **without the sandbox** (`routing.sandbox.mode: none` on "
    "its devbox): it can read whatever the spawner's user can."
)


SHARED_NETWORK_NOTE = (
    "> [!WARNING]\n> This session shares its devbox's **network** (`routing.sandbox.network: "
    "host`): it can reach any host, and send there whatever it reads."
)


def _choice(label: str, value: str) -> str:
    return f"{label} `{value}`" if value else f"{label}: the default"


def _session_line(view: ProgressView) -> str:
    words = SESSION_WORDS.get(view.status, view.status)
    if view.status == S.STALLED:
        screen = f" at a {view.stall.replace('-', ' ')}" if view.stall else ""
        hint = f" — {view.stall_hint}" if view.stall_hint else ""
        words = f"**stalled{screen}**{hint}"
    elif view.status in (S.FROZEN, S.SPAWNING) and view.setting_up:
        words = view.setting_up
    elif view.status == S.FROZEN and view.held:
        words = f"waiting: {view.held}"
    elif view.status == S.FROZEN and view.queued is not None:
        position, length = view.queued
        words = f"queued ({position} of {length}) for a spawner"
    elif view.status == S.STOPPED and view.budget_spent:
        words = "**stopped: budget** (an authorized `the-loop budget +<amount>` goes on)"
        if view.capped:
            words = "**stopped: spend cap** (an authorized `the-loop budget` lifts it for the day)"
    elif view.status == S.EXITED and view.failure:
        # The spawner's words may quote git or a path the session chose: defused, one line.
        reason = defuse(" ".join(view.failure.split()).replace("`", "'"))
        words = f"**could not start**: `{reason}` (a follow-up or `execute` tries again)"
    choice = " · ".join(
        (
            _choice("harness", view.harness),
            _choice("model", view.model),
            _choice("effort", view.effort),
        )
    )
    return f"**Session:** {words} · {choice}"


def _phase_line(node: str, state: PhaseState, view: ProgressView) -> str:
    line = f"| {ICONS[state]} | `{node}` | {state.value} |"
    if state is PhaseState.WAITING:
        line = (
            f"| {ICONS[state]} | `{node}` | waiting on a human: reply `{view.approve_keyword}` "
            f"or `{view.changes_keyword} <what to change>` |"
        )
    return line


def render_progress(view: ProgressView) -> str:
    """The whole progress comment for `view`."""
    done = view.status == S.DONE
    lines = ["### the-loop: progress", ""]
    pr = view.pull_request
    if done and pr.get("merged"):
        lines += [f"**Done.** Pull request #{pr.get('number')} merged.", ""]
    elif done:
        lines += ["**Done.** This work item walked every phase in force.", ""]
    lines += [_session_line(view), ""]
    if view.unsandboxed:
        lines += [UNSANDBOXED_NOTE, ""]
    if view.shared_network:
        lines += [SHARED_NETWORK_NOTE, ""]
    lines += ["| | phase | |", "|---|---|---|"]
    lines += [_phase_line(node, state, view) for node, state in phase_rows(view.walk)]
    links = work_links(view.page, view.branch, view.spec_id, view.artifacts)
    shown = ", ".join(markdown_link(path, url) for path, url in links.artifacts)
    lines += ["", f"**Artifacts:** {shown or 'none reported yet'}"]
    if links.branch:
        lines.append(f"**Branch:** {markdown_link(links.branch, links.branch_url)}")
    if pr.get("number"):
        state = " (merged)" if pr.get("merged") else " (closed)" if pr.get("closed") else ""
        lines.append(f"**Pull request:** [#{pr['number']}]({pr.get('html_url', '')}){state}")
    if view.usage:
        lines.append(view.usage)
    if view.budget:
        lines.append(view.budget)
    lines += [f"- {note}" for note in view.notes]
    if view.throttled:
        lines += ["", THROTTLED_NOTE]
    # A stall's hint and the artifacts' names come from the session: defused, marker last.
    return (
        defuse("\n".join(lines))
        + "\n\n"
        + marker(MarkerKind.PROGRESS, item=view.work_item_id)
        + "\n"
    )


def mirror_payload(view: ProgressView) -> dict[str, Any]:
    """The same facts, structured, for a chat surface to render its own way (pure)."""
    return {
        "status": "stopped: budget" if view.budget_spent else view.status,
        "phase": view.walk.pointer,
        "phases": [[node, state.value] for node, state in phase_rows(view.walk)],
        "harness": view.harness,
        "model": view.model,
        "effort": view.effort,
        "stall": view.stall,
        "stall_hint": view.stall_hint,
        "queued": list(view.queued) if view.queued else None,
        "waiting": view.held or None,  # why a spend cap holds it in line
        "artifacts": list(view.artifacts),
        "pull_request": dict(view.pull_request),
        "links": work_links(view.page, view.branch, view.spec_id, view.artifacts).to_json(),
        "approve_keyword": view.approve_keyword,
        "changes_keyword": view.changes_keyword,
        "usage": _plain(view.usage),
        "budget": _plain(view.budget),
    }


def _plain(line: str) -> str:
    """A `**Label:** words` line's words, for a surface that sets its own label."""
    return line.split(":** ", 1)[1] if line.startswith("**") and ":** " in line else line
