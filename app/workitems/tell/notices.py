"""One-line notices on the issue about the session: a stall is announced once, mentioning
whoever executed, with what the screen asks and how to reach it; the move past it gets a
short note. The progress comment shows the same state all along; these reach the people
who are notified by mentions."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from githubkit.exception import GitHubException
from sqlalchemy.orm import Session

from app.gate import MarkerKind, defuse, marker
from app.github import GitHubNotConfigured, IssueIO, Services
from app.store import WorkItem

log = logging.getLogger(__name__)


def executor_of(item: WorkItem) -> str:
    decision = ((item.frozen or {}).get("decisions") or {}).get("phase-selection") or {}
    return str(decision.get("by") or "") if isinstance(decision, dict) else ""


def _screen_words(screen: str) -> str:
    return screen.replace("-", " ") if screen else "an interactive screen"


def stall_text(
    work_item_id: str,
    episode: int,
    executor: str,
    fields: Mapping[str, Any],
    answer_keyword: str,
) -> str:
    """The stall notice (pure). `fields` are the `session.stalled` event's: what the session
    drew in its pane, so they are defused before the App's marker is added."""
    who = f"@{executor}, " if executor else ""
    screen = _screen_words(str(fields.get("screen") or ""))
    hint = str(fields.get("hint") or "")
    spawner = str(fields.get("spawner") or "the devbox")
    target = str(fields.get("tmux_target") or "")
    socket, _, name = target.partition(":")
    lines = [
        f"{who}the session of this work item is **waiting at a {screen}**."
        + (f" {hint}." if hint and not hint.endswith(".") else f" {hint}" if hint else "")
    ]
    question = str(fields.get("question") or "")
    if question:
        lines += ["", f"> {question}"]
    options: Sequence[Any] = fields.get("options") or []
    if options:
        lines += ["", "It offers:"]
        lines += [f"{index}. {option}" for index, option in enumerate(options, start=1)]
        lines += ["", f"Reply `{answer_keyword} <n>` to choose one (the same rule as execute)."]
    if name:
        lines += ["", f"To look at it: `tmux -L {socket} attach -t {name}` on `{spawner}`."]
    text = defuse("\n".join(lines))
    return f"{text}\n\n{marker(MarkerKind.NOTICE, item=work_item_id, stall=episode)}\n"


def moved_text(work_item_id: str, episode: int, was: str) -> str:
    """The short note when the session moved past the screen (pure)."""
    return (
        defuse(f"The session moved on from the {_screen_words(was)}; it is running again.")
        + "\n\n"
        + marker(MarkerKind.NOTICE, item=work_item_id, unstall=episode)
        + "\n"
    )


def _post(services: Services, item: WorkItem, text: str, **attrs: object) -> None:
    if item.installation_id is None:
        return
    io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
    try:
        io.post_once(text, MarkerKind.NOTICE, item=item.id, **attrs)
    except (GitHubException, GitHubNotConfigured) as exc:  # the progress comment still shows it
        log.warning("stall notice on %s failed: %s", item.id, exc)
        services.events.emit("notice.failed", item.id, error=str(exc)[:300])


def announce_stall(
    services: Services, session: Session, item: WorkItem, episode: int, fields: Mapping[str, Any]
) -> None:
    keyword = services.config.routing.trigger.answer_keyword
    text = stall_text(item.id, episode, executor_of(item), fields, keyword)
    _post(services, item, text, stall=episode)


def announce_moved(services: Services, item: WorkItem, episode: int, was: str) -> None:
    _post(services, item, moved_text(item.id, episode, was), unstall=episode)
