"""The texts the gate writes after an execute reply (pure): confirmation, refusal, prompt.

Every name these texts echo is an operator-declared name, a phase node or a GitHub login;
no comment text is ever repeated back.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.gate.classify import Selection
from app.gate.markers import MarkerKind, marker
from app.gate.phases import PHASES
from app.graph import NODES, Node, approval_stops

_NO_SKIPS = "- **Phases skipped:** none"


def _choice_line(label: str, value: str, default: str) -> str:
    return f"- **{label}:** " + (f"`{value}`" if value else f"the default ({default})")


def confirmation_markdown(
    selection: Selection,
    author: str,
    work_item_id: str,
    ref: str | None = None,
    base: str = "",
) -> str:
    """What will run: skipped phases and by whom, harness, model, effort, the base branch
    ("" the repository's default), dropped ticks. `ref` (the execute's id) tells a later
    run's confirmation from the first one's."""
    phases, stops = approval_stops(selection.skips)
    skipped = ", ".join(f"`{node}`" for node in phases)
    lines = [
        "### the-loop: starting",
        "",
        f"@{author} signed the phase selection. This is what runs:",
        "",
        f"- **Phases skipped:** {skipped} (by @{author})" if skipped else _NO_SKIPS,
    ]
    if stops:
        lines.append("- **Stops for approval at:** " + ", ".join(f"`{g}`" for g in stops))
    if selection.harness_offered:
        lines.append(_choice_line("Harness", selection.harness, f"`{selection.resolved_harness}`"))
    lines.append(_choice_line("Model", selection.model, "the harness's own"))
    lines.append(_choice_line("Effort", selection.effort, "the harness's own"))
    lines.append(_choice_line("Base branch", base, "the repository's default branch"))
    if selection.dropped:
        lines += ["", "Ticks dropped:"]
        lines += [f"- `{d.token}`: {d.reason}" for d in selection.dropped]
    confirmed = marker(MarkerKind.CONFIRMATION, item=work_item_id, ref=ref)
    lines += ["", "Starting a session now.", "", confirmed]
    return "\n".join(lines) + "\n"


def who_may_execute(authorized_users: Sequence[str] | None, repo: str, keyword: str) -> str:
    """One sentence naming who may reply `keyword` (design.md's authorization rule: the same
    for execute, approve and changes)."""
    if authorized_users is not None and not authorized_users:
        return "Nobody is listed in `routing.authorizedUsers`, so no comment can start it."
    if authorized_users is not None:
        names = ", ".join(f"@{u}" for u in authorized_users)
        return f"Only {names} may reply `{keyword}`."
    return f"People with write, maintain or admin access to {repo} may reply `{keyword}`."


def refusal_markdown(
    who: str, why: str, may: str, work_item_id: str, ref: str, action: str = "start the work"
) -> str:
    """One short reply to a refused decision: what it did not do, why, and who may."""
    lines = [
        f"@{who}, this did not {action}: {why}. {may}",
        "",
        marker(MarkerKind.REFUSAL, item=work_item_id, ref=ref),
    ]
    return "\n".join(lines) + "\n"


def _phases_in_force(skips: Sequence[str]) -> list[str]:
    return [p.node for p in PHASES if p.node not in skips]


def _artifact(node: Node, spec_id: str) -> str:
    if node.requires:
        return " or ".join(f"docs/specs/{spec_id}/{name}" for name in node.requires[0])
    if node.tasks_ticked:
        return f"every task in docs/specs/{spec_id}/tasks.md ticked"
    if node.human_gate:
        return "a human decision on the issue"
    return "nothing to write"


def walk_instructions(spec_id: str, skips: Sequence[str]) -> list[str]:
    """How the session walks its phases: what each needs, `phase next`, the stop gate."""
    walked = _phases_in_force(skips)
    lines = ["How to walk the phases:"]
    lines += [f"- {n.name}: {_artifact(n, spec_id)}" for n in NODES if n.name in walked]
    lines += [
        "After producing a phase's artifact, run `the-loop phase next`: it moves the work item "
        "to the next phase, or says exactly what is missing. `the-loop phase` shows where the "
        "work item stands.",
        "A stop gate checks the current phase whenever you end a turn: while its artifact is "
        "missing, the turn does not end and you are told what to write.",
        "At `review` a human approves or requests changes on the issue: end your turn and wait; "
        "the decision arrives as a message. After approval, `the-loop phase next` completes "
        "the work item.",
    ]
    stops = approval_stops(skips)[1]
    if stops:
        lines.append(
            "At "
            + ", ".join(f"`{g}`" for g in stops)
            + " a human reads the phase's artifact and approves or requests changes the same "
            "way: commit and push the artifact before the `phase next` that takes you there "
            "(the notice links it on your branch), then end your turn and wait. Requested "
            "changes send you back to that phase."
        )
    return lines


def branch_instructions(branch: str, pull_number: int | None) -> list[str]:
    """Where the session commits and how its work becomes (or already is) a pull request."""
    if not branch:
        return []
    push = (
        f"Commit on the branch `{branch}` (already checked out) and publish with `git push`: "
        "the App hands git a short-lived credential for this repository when it asks, so "
        "nothing is stored."
    )
    if pull_number is not None:
        return [
            push,
            f"This is pull request #{pull_number}: reviews, comments and failing checks on it "
            "arrive here as messages.",
        ]
    return [
        push,
        "When the work is ready for review, open the pull request with `the-loop pr create "
        '--title "…" --body-file <file>` (`the-loop pr` shows it). Reviews, comments and '
        "failing checks on it arrive here as messages; a merge completes the work item.",
    ]


def initial_prompt(
    *,
    title: str,
    body: str,
    url: str,
    spec_id: str,
    selection: Selection,
    unattended: bool,
    branch: str = "",
    pull_number: int | None = None,
) -> str:
    """The first prompt of the session: the issue (or the labelled pull request), the phases
    in force, how to walk them, the branch to push, and how to talk back. The body goes in
    whole: GitHub caps an issue body at 65,536 characters, which a session's first message
    carries easily, and a cut would hide from the agent what the human approved."""
    text = body.replace("\x00", "")
    phases = ", ".join(_phases_in_force(selection.skips))
    what = "pull request" if pull_number is not None else "issue"
    lines = [
        f"Work on the GitHub {what} {url}: {title.replace(chr(0), '')}",
        "",
        f"Work item: {spec_id}. Artifacts go under docs/specs/{spec_id}/.",
        f"Phases in force, in order: {phases}.",
    ]
    skipped = approval_stops(selection.skips)[0]
    if skipped:
        lines.append("Skipped by the human: " + ", ".join(skipped) + ".")
    lines += ["", *walk_instructions(spec_id, selection.skips), ""]
    if branch:
        lines += [*branch_instructions(branch, pull_number), ""]
    if unattended:
        lines.append(
            "Nobody is watching this terminal. Post progress with `the-loop comment` and put "
            "every question on the issue with `the-loop ask`."
        )
    lines += ["", "Issue body:", "", text.strip() or "(empty)"]
    return "\n".join(lines) + "\n"
