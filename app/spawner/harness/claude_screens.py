"""What a Claude Code pane shows, read from its text. Pure.

`classify_screen` recognises the screens on which Claude Code waits for a keypress forever:
the workspace trust dialog, the custom API key prompt, the bypass-permissions disclaimer, a
question menu, a permission prompt, and the first-run screen that cannot reach Anthropic.
`input_ready` recognises its input box, the moment a pasted message lands in the input.
`CLAUDE_SCREENS` bundles these readings as the adapter's `ScreenReader` (Codex's twin is
`harness/codex_screens.py`); both report in the shared `Screen` vocabulary of
`harness/screens.py`.
"""

from __future__ import annotations

import re
from itertools import pairwise

from app.spawner.harness.screens import Screen, ScreenReader, first_signature, shows_paste

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

_RULE = re.compile(r"^\s*─{8,}\s*$")
PROMPT_MARK = "\u276f"  # ❯, Claude Code's input prompt  # noqa: RUF003
PASTED_MARK = "[Pasted text"  # how Claude Code shows a long paste in its input box


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


def unsent(text: str, pasted: str) -> bool:
    """True when the input box still holds `pasted` (collapsed or as its first line): the Enter
    after it did not submit it."""
    held = input_line(text)
    return bool(held) and shows_paste(held or "", pasted, PASTED_MARK)


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
    return sum(1 for shown in _messages(text) if shows_paste(shown, pasted, PASTED_MARK))


def transcript_messages(text: str) -> int:
    """How many messages the visible transcript shows: none in a session never sent one."""
    return len(_messages(text))


CLAUDE_SCREENS = ScreenReader(
    classify=classify_screen,
    input_ready=input_ready,
    input_line=input_line,
    unsent=unsent,
    echoes=echoes,
    transcript_messages=transcript_messages,
    hints=HINTS,
)
