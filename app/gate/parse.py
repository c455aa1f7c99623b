"""Reading comment text back: is it an execute reply, and which rows does it tick (pure).

Row grammar: a task-list item `- [x] token` or `- [ ] token` (`*` and `+` bullets too), the
token optionally in backticks, the line optionally quoted with `>` (a quoted reply).
Anything after the token is ignored; rows inside fenced code blocks are not rows. Tokens
are only ever looked up against the offered names, never used as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROW_RE = re.compile(
    r"^[ \t]*(?:>[ \t]*)*[-*+][ \t]+\[([ xX])\][ \t]+`?"
    r"([A-Za-z0-9][A-Za-z0-9._-]{0,127})(?![A-Za-z0-9._-])"
)
_FENCE_RE = re.compile(r"^[ \t]*(?:>[ \t]*)*(```|~~~)")


@dataclass(frozen=True)
class Tick:
    token: str
    checked: bool


def parse_rows(text: str | None) -> tuple[Tick, ...]:
    """Every checklist row in `text`, in order (a token may appear more than once)."""
    ticks: list[Tick] = []
    fence: str | None = None
    for line in (text or "").splitlines():
        opening = _FENCE_RE.match(line)
        if opening:
            mark = opening.group(1)
            fence = None if fence == mark else (fence or mark)
            continue
        if fence is not None:
            continue
        match = _ROW_RE.match(line)
        if match:
            ticks.append(Tick(token=match.group(2), checked=match.group(1) != " "))
    return tuple(ticks)


def first_ticks(ticks: tuple[Tick, ...]) -> dict[str, bool]:
    """Token → ticked, the first row naming a token deciding it."""
    states: dict[str, bool] = {}
    for tick in ticks:
        states.setdefault(tick.token, tick.checked)
    return states


def says_command(body: str | None, keyword: str) -> bool:
    """True when `body` starts with the command `keyword` (case-insensitive), as a whole word.

    Any command keyword works (execute, approve, changes, answer, budget, allow…). Leading
    whitespace is allowed; `the-loop executed` is not `the-loop execute`.
    """
    text = (body or "").lstrip("\ufeff \t\r\n")
    key = keyword.strip()
    if not key or text[: len(key)].lower() != key.lower():
        return False
    rest = text[len(key) :]
    return rest == "" or not (rest[0].isalnum() or rest[0] in "-_")


BASE_PREFIX = "base:"
# An issue may name its base on a line of its own: `base: release/2.4` (backticks allowed).
_ISSUE_BASE = re.compile(r"^[ \t]*base:[ \t]*`?([^\s`]+)`?[ \t]*$", re.IGNORECASE | re.MULTILINE)


def issue_base(body: str | None) -> str | None:
    """The branch an issue's text names on a line of its own (`base: release/2.4`), the
    first such line deciding; None when none does. Not checked here (`ids.branch_name_ok`):
    an execute checks it as it checks a reply's `base:` word."""
    found = _ISSUE_BASE.search(body or "")
    return found.group(1) if found else None


def execute_base(body: str | None, keyword: str) -> str | None:
    """The branch a `base:<branch>` word on the execute line names (`the-loop execute
    base:release/2.4` → `release/2.4`), `""` for a bare `base:`, None when the line has no
    such word (the pull request then targets the default branch). Only the words after
    `keyword` on its own line count, the first `base:` word deciding; the name is not checked
    here (`ids.branch_name_ok`)."""
    if not says_command(body, keyword):
        return None
    text = (body or "").lstrip("\ufeff \t\r\n")
    line = text[len(keyword.strip()) :].split("\n", 1)[0]
    for word in line.split():
        if word.lower().startswith(BASE_PREFIX):
            return word[len(BASE_PREFIX) :]
    return None
