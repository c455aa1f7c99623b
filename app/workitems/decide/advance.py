"""Moving a work item's pointer: a session's `the-loop phase next`, a human's decision at a
gate, and completion. The App's record is the authority; every move is recorded as a
`workitem.phase` event and shows in the progress comment.

A session's move is taken only on what the item's spawner saw, on the host, of the phase's
artifacts in the checkout (`session.evidence`, read there without following links): what a
session says it wrote is never enough. Until the spawner reports the artifacts the move is
`UnseenArtifacts` (the session's `phase next` waits for the next look and asks again).

Reaching a gate that waits for a decision (`review`, or an approval gate the human ticked)
asks the humans on the issue (and in Slack) to approve or request changes, linking the
artifacts to read; reaching `complete` finishes the item.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app import graph
from app.gate import (
    MarkerKind,
    WorkLinks,
    defuse,
    frozen_skips,
    markdown_link,
    marker,
    spec_id,
    work_links,
)
from app.github import IssueIO, Services
from app.store import Event, WorkItem
from app.workitems.decide.walk import (
    COMPLETE_NODE,
    MoveRefused,
    Walk,
    approved_phase,
    clean_artifacts,
    is_approval_gate,
    is_decision_gate,
    next_in_force,
    next_move,
)
from app.workitems.flow.jobs import enqueue, stop_job
from app.workitems.flow.states import Happened, transition


class UnseenArtifacts(MoveRefused):
    """The spawner has not (yet) seen, on the host, what the phase being left needs."""


def host_problems(item: WorkItem, node: str, skips: Iterable[str]) -> list[str]:
    """What the spawner's last look at the checkout lacks for leaving `node` (pure)."""
    seen = graph.evidence_from((item.session or {}).get("evidence"))
    problems = graph.artifact_problems(
        node, spec_id(item.issue_number), seen or graph.Evidence(), skips
    )
    if problems and seen is None:
        return ["the devbox has not reported what it sees in the checkout yet"]
    return problems


def walk_of(item: WorkItem) -> Walk:
    """The item's position as the App records it."""
    frozen = item.frozen or {}
    return Walk(
        pointer=item.phase or "",
        skips=frozenset(frozen_skips(frozen)),
        decisions={**(frozen.get("decisions") or {}), **(item.gates or {})},
    )


def record_move(
    services: Services, session: Session, item: WorkItem, to: str, **facts: Any
) -> None:
    """Set the pointer and say so (the event names where it came from and why)."""
    previous = item.phase
    item.phase = to
    services.events.emit(
        "workitem.phase", item.id, session=session, **{"from": previous, "to": to}, **facts
    )


def advance(
    services: Services,
    session: Session,
    item: WorkItem,
    asked_from: str,
    artifacts: Iterable[Any] = (),
) -> str:
    """A session asks to move on from `asked_from`; returns the new pointer (raises
    `MoveRefused` with the one line the agent is told)."""
    walk = walk_of(item)
    target = next_move(walk, asked_from)
    problems = host_problems(item, asked_from, walk.skips)
    if problems:
        raise UnseenArtifacts(
            f"{asked_from} is not done as the devbox sees it: " + "; ".join(problems)
        )
    seen = graph.evidence_from((item.session or {}).get("evidence")) or graph.Evidence()
    item.artifacts = [name for name in clean_artifacts(artifacts) if name in seen.present]
    record_move(services, session, item, target, by="session", artifacts=item.artifacts)
    if is_decision_gate(target):
        ask_for_decision(services, session, item, target)
    elif target == COMPLETE_NODE:
        complete(services, session, item, reason="every phase in force is done")
    return target


def move_count(session: Session, item: WorkItem) -> int:
    """A number that grows with every move of the item: tells this review round's comment
    from an earlier one's (and is the same when a failed request is retried), and starts
    the stop gate's count again (`gate_counts`)."""
    moves = session.scalars(
        select(func.count())
        .select_from(Event)
        .where(Event.work_item_id == item.id, Event.event == "workitem.phase")
    ).one()
    return int(moves)


def _links(item: WorkItem) -> WorkLinks:
    """The item's branch and artifacts, each with its page on GitHub."""
    page, branch = item.html_url or "", item.branch or ""
    return work_links(page, branch, spec_id(item.issue_number), item.artifacts or [])


def to_read(gate: str, artifacts: Iterable[str]) -> list[str]:
    """The artifacts an approver at `gate` reads first: those the judged phase writes
    (design.md at `approve-design`), of the ones reported (pure)."""
    node = next((n for n in graph.NODES if n.name == approved_phase(gate)), None)
    names = {name for alternatives in (node.requires if node else ()) for name in alternatives}
    return [name for name in artifacts if name in names]


def _decision_head(item: WorkItem, gate: str, links: WorkLinks) -> list[str]:
    """The title, the first sentence and, at an approval gate, what to read (pure)."""
    if not is_approval_gate(gate):
        return [
            "### the-loop: ready for review",
            "",
            "The session finished the phases before `review` and waits for a human decision.",
            "",
        ]
    phase = approved_phase(gate)
    own = set(to_read(gate, item.artifacts or []))
    read = [markdown_link(path, url) for path, url in links.artifacts if path.split("/")[-1] in own]
    return [
        f"### the-loop: `{phase}` waits for approval",
        "",
        f"The session finished `{phase}` and stops at `{gate}` until a human decides.",
        "",
        f"- **Read:** {', '.join(read) or 'nothing reported'}",
    ]


def decision_text(item: WorkItem, approve: str, changes: str, round_: int, gate: str) -> str:
    """The notice that `gate` waits for a decision: what to read and the two replies (pure)."""
    links = _links(item)
    artifacts = ", ".join(markdown_link(path, url) for path, url in links.artifacts)
    pr = getattr(item, "pull_request", None) or {}
    lines = [*_decision_head(item, gate, links), f"- **Artifacts:** {artifacts or 'none reported'}"]
    if links.branch:
        lines.append(f"- **Branch:** {markdown_link(links.branch, links.branch_url)}")
    if pr.get("number"):
        lines.append(f"- **Pull request:** [#{pr['number']}]({pr.get('html_url', '')})")
    go_on = (
        f"go on to `{next_in_force(gate, walk_of(item).skips) or COMPLETE_NODE}`"
        if is_approval_gate(gate)
        else "complete"
    )
    lines += [
        "",
        f"Reply `{approve}` to let it {go_on}, or `{changes} <what to change>` to send it back "
        f"to `{approved_phase(gate) or gate}` with your words.",
    ]
    # The artifacts' names are the session's words: defused, the App's marker last.
    return (
        defuse("\n".join(lines))
        + "\n\n"
        + marker(MarkerKind.REVIEW, item=item.id, round=round_)
        + "\n"
    )


def ask_for_decision(services: Services, session: Session, item: WorkItem, gate: str) -> None:
    """Post the notice that `gate` waits (once per round) and show Approve/Changes in Slack."""
    trigger = services.config.routing.trigger
    round_ = move_count(session, item)
    text = decision_text(item, trigger.approve_keyword, trigger.changes_keyword, round_, gate)
    if item.installation_id is not None:
        io = IssueIO(services.github, item.installation_id, item.repo_full_name, item.issue_number)
        io.post_once(text, MarkerKind.REVIEW, item=item.id, round=round_)
    services.mirror.post(
        session,
        item.id,
        "review",
        {
            "gate": gate,
            "phase": approved_phase(gate),
            "to_read": to_read(gate, item.artifacts or []),
            "artifacts": list(item.artifacts or []),
            "links": _links(item).to_json(),
            "pull_request": dict(getattr(item, "pull_request", None) or {}),
            "approve_keyword": trigger.approve_keyword,
            "changes_keyword": trigger.changes_keyword,
            "url": item.html_url,
        },
    )


def complete(
    services: Services,
    session: Session,
    item: WorkItem,
    *,
    reason: str,
    happened: Happened = Happened.COMPLETED,
) -> None:
    """The item is done (it walked to `complete`, or its pull request merged): record it,
    tell Slack, and stop the session when configured."""
    if transition(item, happened) is None:
        return
    services.events.emit("workitem.done", item.id, session=session, reason=reason)
    services.mirror.post(session, item.id, "done", {"reason": reason, "url": item.html_url})
    if services.config.routing.completion.stop_session:
        enqueue(services, session, f"stop-done:{item.id}", stop_job(item, reason="complete"))
