"""What a session's pane shows, in the words every harness shares. Pure.

`Screen` is the one vocabulary of blocking screens — those on which a harness waits for a
keypress forever — and `ScreenReader` bundles how one harness's pane reads; each harness
adapter names its own (`harness/claude_screens.py`, `harness/codex_screens.py`). The helpers
here read any pane: `first_signature` finds a screen by its phrases, `shows_paste` whether a
line shows a paste, `last_lines` the tail the watchdog reports when a session exits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum


class Screen(StrEnum):
    TRUST_DIALOG = "trust-dialog"
    API_KEY_PROMPT = "api-key-prompt"
    BYPASS_DISCLAIMER = "bypass-disclaimer"
    QUESTION_MENU = "question-menu"
    PERMISSION_PROMPT = "permission-prompt"
    UNABLE_TO_CONNECT = "unable-to-connect"
    HOOKS_REVIEW = "hooks-review"


_SPACE = re.compile(r"\s+")
DEAD_PANE_LINE = "Pane is dead"


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text)


def first_signature(
    text: str, signatures: tuple[tuple[Screen, tuple[str, ...]], ...]
) -> Screen | None:
    """The first screen of `signatures` whose every phrase `text` shows (whitespace-blind):
    how any harness's pane is read."""
    flat = _flat(text)
    for screen, phrases in signatures:
        if all(_flat(p) in flat for p in phrases):
            return screen
    return None


def shows_paste(line: str, pasted: str, collapsed: str) -> bool:
    """Whether an input or transcript line shows `pasted`: collapsed (the harness's own
    `collapsed` mark), or its first line."""
    if line.startswith(collapsed):
        return True
    first = next((ln.strip() for ln in pasted.splitlines() if ln.strip()), "")
    return bool(first) and bool(line) and (first.startswith(line) or line.startswith(first[:40]))


def last_lines(text: str, count: int = 6, limit: int = 600) -> list[str]:
    """The last non-empty lines of a pane, without tmux's own "Pane is dead" line."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(DEAD_PANE_LINE)]
    tail = lines[-count:]
    while sum(len(ln) for ln in tail) > limit and len(tail) > 1:
        tail = tail[1:]
    return [ln[:limit] for ln in tail]


@dataclass(frozen=True)
class ScreenReader:
    """How one harness's pane reads: its blocking screens (and a hint for each), whether its
    input box shows, what the box holds, and how many sent messages its transcript shows."""

    classify: Callable[[str], Screen | None]
    input_ready: Callable[[str], bool]
    input_line: Callable[[str], str | None]
    unsent: Callable[[str, str], bool]
    echoes: Callable[[str, str], int]
    transcript_messages: Callable[[str], int]
    hints: Mapping[Screen, str]
