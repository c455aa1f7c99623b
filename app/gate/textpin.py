"""The issue text a human approves, pinned (pure).

When the checklist is posted, the App records the issue's title and body with the body's
SHA-256 and the time it read them (`pin`). An execute re-reads the issue: if the title or the
body differs from the pin (edited by anyone since), the session does not start; the reply
says what changed — who and when, as far as GitHub told the App, and a line count of the
difference — and asks for the execute again (`change_markdown`). The App then pins the text
it just read, so the next execute approves exactly that. The session's prompt is built from
the pinned text, and the frozen record keeps its hash.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.gate.markers import MarkerKind, marker


def digest(body: str) -> str:
    """SHA-256 (hex) of an issue body as GitHub returns it."""
    return hashlib.sha256(body.encode()).hexdigest()


def pin(title: str, body: str, at: datetime) -> dict[str, Any]:
    """The record kept on the work item: the text, the body's hash, when it was read."""
    return {"title": title, "body": body, "sha256": digest(body), "read_at": at.isoformat()}


def issue_text(issue: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(title, body) of a GitHub issue object; None when there is none to read."""
    if not issue:
        return None
    title, body = issue.get("title"), issue.get("body")
    return (title if isinstance(title, str) else ""), (body if isinstance(body, str) else "")


@dataclass(frozen=True)
class Change:
    """How the issue differs from its pin, and what GitHub said about the last edit."""

    title_changed: bool
    added: int
    removed: int
    by: str | None
    at: str | None

    def summary(self) -> str:
        parts = ["the title"] if self.title_changed else []
        if self.added or self.removed:
            parts.append(f"the body (+{self.added} -{self.removed} lines)")
        return " and ".join(parts) or "the issue"


def change_since(
    pinned: Mapping[str, Any] | None, title: str, body: str, updated_at: str | None = None
) -> Change | None:
    """How (title, body) differ from `pinned`; None when they are what was pinned. With no
    pin at all (an item from before pinning) everything counts as changed."""
    if pinned is None:
        return Change(True, len(body.splitlines()), 0, None, updated_at)
    old_title, old_body = str(pinned.get("title", "")), str(pinned.get("body", ""))
    if title == old_title and digest(body) == pinned.get("sha256"):
        return None
    added = removed = 0
    for line in difflib.unified_diff(old_body.splitlines(), body.splitlines(), lineterm="", n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    edit = pinned.get("last_edit") or {}
    by = edit.get("by") if isinstance(edit.get("by"), str) else None
    at = edit.get("at") if isinstance(edit.get("at"), str) else updated_at
    return Change(title != old_title, added, removed, by, at)


def change_markdown(
    who: str, change: Change, read_at: str | None, keyword: str, work_item_id: str, ref: str
) -> str:
    """The reply to an execute that found the issue changed since it was read."""
    when = f" at {change.at}" if change.at else ""
    if change.by:
        edited = f"Last edited by @{change.by}{when}."
    else:
        edited = "GitHub did not say who edited it" + (
            f" (the issue was last updated {change.at})." if change.at else "."
        )
    since = f"the App read the issue ({read_at})" if read_at else "the checklist was posted"
    lines = [
        f"@{who}, this did not start the work: {change.summary()} changed since {since}. " + edited,
        "",
        f"Read the issue as it is now; if it is what should run, reply `{keyword}` again.",
        "",
        marker(MarkerKind.CHANGED, item=work_item_id, ref=ref),
    ]
    return "\n".join(lines) + "\n"
