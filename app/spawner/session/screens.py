"""What a session's pane shows, read from its text. Pure.

`classify_screen` recognises the screens on which Claude Code waits for a keypress forever:
the workspace trust dialog, the custom API key prompt, the bypass-permissions disclaimer, a
question menu, a permission prompt, and the first-run screen that cannot reach Anthropic.
`input_ready` recognises its input box, the moment a pasted message lands in the input.
`ScreenReader` bundles these readings; each harness adapter names its own (`CLAUDE_SCREENS`
here, Codex's in `harness/codex_screens.py`), and `Screen` is the one vocabulary of blocking
screens they report in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise


class Screen(StrEnum):
    TRUST_DIALOG = "trust-dialog"
    API_KEY_PROMPT = "api-key-prompt"
    BYPASS_DISCLAIMER = "bypass-disclaimer"
    QUESTION_MENU = "question-menu"
    PERMISSION_PROMPT = "permission-prompt"
    UNABLE_TO_CONNECT = "unable-to-connect"
    HOOKS_REVIEW = "hooks-review"


# Every phrase of a signature must be on screen (whitespace-insensitive).
SIGNATURES: tuple[tuple[Screen, tuple[str, ...]], ...] = (
    (Screen.TRUST_DIALOG, ("Is this a project you created or one you trust", "trust this folder")),
    (Screen.API_KEY_PROMPT, ("Detected a custom API key", "Do you want to use this API key?")),
    (Screen.BYPASS_DISCLAIMER, ("running in Bypass Permissions mode", "Yes, I accept")),
    (Screen.QUESTION_MENU, ("Enter to select", "to navigate", "Esc to cancel")),
    (Screen.PERMISSION_PROMPT, ("Do you want to", "1. Yes", "Esc to cancel")),
    (Screen.UNABLE_TO_CONNECT, ("Unable to connect to Anthropic services",)),
)

HINTS: dict[Screen, str] = {
    Screen.TRUST_DIALOG: "the workspace is not trusted; see workspace.trust_failed for why",
    Screen.API_KEY_PROMPT: "Claude Code asks whether to use ANTHROPIC_API_KEY; approve it once "
    "interactively or log in with `claude /login` on the devbox",
    Screen.BYPASS_DISCLAIMER: "the bypass-permissions disclaimer is not accepted; set "
    "routing.harnessTrust.acceptBypassPermissions: auto",
    Screen.QUESTION_MENU: "the session opened a question menu; answer it in tmux",
    Screen.PERMISSION_PROMPT: "the session asks for a permission; answer it in tmux or declare "
    "the permission flags under harnesses[].args",
    Screen.UNABLE_TO_CONNECT: "Claude Code cannot reach Anthropic from the devbox",
}

_SPACE = re.compile(r"\s+")
_RULE = re.compile(r"^\s*─{8,}\s*$")
PROMPT_MARK = "\u276f"  # ❯, Claude Code's input prompt  # noqa: RUF003
DEAD_PANE_LINE = "Pane is dead"
PASTED_MARK = "[Pasted text"  # how Claude Code shows a long paste in its input box


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


def classify_screen(text: str) -> Screen | None:
    """The blocking screen `text` shows, or None for a session that is working or idle."""
    return first_signature(text, SIGNATURES)


def input_ready(text: str) -> bool:
    """True when the pane shows Claude Code's input box — a line starting with PROMPT_MARK
    between two horizontal rules — and no blocking screen: text pasted now lands in the
    input."""
    if classify_screen(text) is not None:
        return False
    lines = text.splitlines()
    return any(
        lines[i].lstrip().startswith(PROMPT_MARK)
        and _RULE.match(lines[i - 1]) is not None
        and _RULE.match(lines[i + 1]) is not None
        for i in range(1, len(lines) - 1)
    )


def input_line(text: str) -> str | None:
    """What Claude Code's input box holds (stripped; its lines joined by newlines), or None
    when no input box shows. The box is the last two rules with a prompt-marked line right
    under the first. A paste it collapsed reads "[Pasted text #1 +22 lines]"; a short
    multi-line one shows every line; an empty box reads ""."""
    if classify_screen(text) is not None:
        return None
    lines = text.splitlines()
    rules = [i for i, ln in enumerate(lines) if _RULE.match(ln)]
    for top, bottom in reversed(list(pairwise(rules))):
        first = lines[top + 1].lstrip() if bottom > top + 1 else ""
        if first.startswith(PROMPT_MARK):
            held = [first[len(PROMPT_MARK) :], *lines[top + 2 : bottom]]
            return "\n".join(ln.strip() for ln in held).strip()
    return None


def shows_paste(line: str, pasted: str, collapsed: str = PASTED_MARK) -> bool:
    """Whether an input or transcript line shows `pasted`: collapsed (the harness's own
    `collapsed` mark), or its first line."""
    if line.startswith(collapsed):
        return True
    first = next((ln.strip() for ln in pasted.splitlines() if ln.strip()), "")
    return bool(first) and bool(line) and (first.startswith(line) or line.startswith(first[:40]))


def unsent(text: str, pasted: str) -> bool:
    """True when the input box still holds `pasted` (collapsed or as its first line): the Enter
    after it did not submit it."""
    held = input_line(text)
    return bool(held) and shows_paste(held or "", pasted)


def _messages(text: str) -> list[str]:
    """The messages in the visible transcript: prompt-marked, non-empty lines above the
    input box (what follows the mark)."""
    lines = text.splitlines()
    rules = [i for i, ln in enumerate(lines) if _RULE.match(ln)]
    above = lines[: rules[-2]] if len(rules) >= 2 else lines
    marked = (ln.lstrip() for ln in above)
    shown = (ln[len(PROMPT_MARK) :].strip() for ln in marked if ln.startswith(PROMPT_MARK))
    return [ln for ln in shown if ln]


def echoes(text: str, pasted: str) -> int:
    """How many messages in the visible transcript look like `pasted`: one more after a
    paste than before means it was sent."""
    return sum(1 for shown in _messages(text) if shows_paste(shown, pasted))


def transcript_messages(text: str) -> int:
    """How many messages the visible transcript shows: none in a session never sent one."""
    return len(_messages(text))


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


CLAUDE_SCREENS = ScreenReader(
    classify=classify_screen,
    input_ready=input_ready,
    input_line=input_line,
    unsent=unsent,
    echoes=echoes,
    transcript_messages=transcript_messages,
    hints=HINTS,
)
