"""The checklist as the Markdown comment posted on the issue (pure).

Each row is a GitHub task-list item, `- [x] `token``, so it can be ticked on a phone and
read back by `app.gate.parse`. A choice section longer than `MAX_SHOWN` rows shows the
first ones and says how many more exist. The hidden marker closes the comment.
"""

from __future__ import annotations

from app.gate.checklist import PHASE_KINDS, Checklist, Row, Section
from app.gate.markers import MarkerKind, marker

MAX_SHOWN = 12


def render_row(row: Row, *, with_label: bool) -> str:
    box = "[x]" if row.checked else "[ ]"
    suffix = f" — {row.label}" if with_label and row.label else ""
    if row.note:
        suffix += f" — {row.note}"
    return f"- {box} `{row.token}`{suffix}"


def render_section(section: Section) -> list[str]:
    """A section: bold title and hint, then its rows (choice sections capped at MAX_SHOWN)."""
    phase_rows = section.kind in PHASE_KINDS
    rows = section.rows if phase_rows else section.rows[:MAX_SHOWN]
    lines = [f"**{section.title}** · {section.hint}"]
    lines += [render_row(r, with_label=phase_rows) for r in rows]
    hidden = len(section.rows) - len(rows)
    if hidden > 0:
        lines.append(f"…and {hidden} more")
    return lines


def base_line(keyword: str, default_branch: str = "", named: str | None = None) -> str:
    """Which branch the work starts from and its pull request targets: the one the issue
    names on a `base:` line, else the repository's default (`default_branch`, "" when not
    known); a reply's `base:<branch>` word wins over both."""
    other = f"reply `{keyword} base:<branch>` to start from another"
    if named:
        return f"**Base branch** · `{named}`, named by the issue's `base:` line ({other})."
    default = (
        f"`{default_branch}`, the repository's default"
        if default_branch
        else ("the repository's default branch")
    )
    return f"**Base branch** · {default} ({other})."


def render_checklist(
    checklist: Checklist,
    work_item_id: str,
    *,
    default_branch: str = "",
    named_base: str | None = None,
) -> str:
    """The whole checklist comment for `work_item_id`, saying which base branch the work
    will start from (`base_line`)."""
    keyword = checklist.keyword
    lines = [
        "### the-loop: choose what runs",
        "",
        f"Tick what this work needs, then reply with a comment that starts with `{keyword}`.",
        "The boxes as they are when you reply are what runs; a checklist in your reply "
        "wins over the boxes here.",
    ]
    for section in (s for s in checklist.sections if s.kind in PHASE_KINDS):
        lines += ["", *render_section(section)]
    if checklist.always:
        lines += ["", "Always run: " + ", ".join(checklist.always) + "."]
    for section in (s for s in checklist.sections if s.kind not in PHASE_KINDS):
        lines += ["", *render_section(section)]
    lines += ["", base_line(keyword, default_branch, named_base)]
    lines += [
        "",
        f"Only someone with write access to this repository (or listed in the operator's "
        f"`routing.authorizedUsers`) can reply `{keyword}`.",
        "",
        marker(MarkerKind.CHECKLIST, item=work_item_id),
    ]
    return "\n".join(lines) + "\n"
