# ruff: noqa: RUF002, RUF003
"""What a Codex CLI pane shows, read from its text. Pure.

Read from screens captured from the real binary (tests/data/codex-screens/). Codex marks a
sent message and its input box alike with `›` at the start of the line; the box is the last
such line, with the status line (model · directory) under it, and shows a placeholder while
empty. A long paste shows in the box collapsed as "[Pasted Content N chars]". The screens on
which it waits for a keypress forever: "Trust this folder?", "Hooks need review", and the
approval of a command ("Would you like to run the following command?"), each a numbered
menu whose selected option carries the same `›`.
"""

from __future__ import annotations

import re

from app.spawner.harness.screens import Screen, ScreenReader, first_signature, shows_paste

MARK = "\u203a"  # ›, Codex's prompt and menu-cursor mark
PLACEHOLDERS = ("Ask Codex to do anything", "Ask a follow-up question")
PASTED_MARK = "[Pasted Content"
_OPTION = re.compile(r"^\s*\u203a?\s*\d{1,2}\.\s")

SIGNATURES: tuple[tuple[Screen, tuple[str, ...]], ...] = (
    (Screen.TRUST_DIALOG, ("Trust this folder?", "Trust and continue")),
    (Screen.HOOKS_REVIEW, ("Hooks need review", "Trust all and continue")),
    (Screen.PERMISSION_PROMPT, ("Would you like to run the following command?", "1. Yes")),
    (Screen.PERMISSION_PROMPT, ("Would you like to make the following edits?", "1. Yes")),
)

HINTS: dict[Screen, str] = {
    Screen.TRUST_DIALOG: "Codex does not trust the checkout; see workspace.trust_failed for why",
    Screen.HOOKS_REVIEW: "Codex wants its hooks reviewed; the stop gate's hook was not "
    "pre-trusted (see session.home_failed)",
    Screen.PERMISSION_PROMPT: "Codex asks to run a command; answer it with `the-loop answer` "
    'or set approval_policy = "never" (the spawner writes it unless an argument overrides it)',
}


def classify(text: str) -> Screen | None:
    """The blocking screen `text` shows, or None for a session that is working or idle."""
    return first_signature(text, SIGNATURES)


def _marked(lines: list[str]) -> list[int]:
    """Indexes of the lines starting with the mark that are not menu options."""
    return [
        i
        for i, line in enumerate(lines)
        if line.lstrip().startswith(MARK) and not _OPTION.match(line)
    ]


def _held(lines: list[str], at: int) -> str:
    """The text of the marked line `at` and the lines continuing it (up to a blank line)."""
    held = [lines[at].lstrip()[len(MARK) :]]
    for line in lines[at + 1 :]:
        if not line.strip() or line.lstrip().startswith(MARK):
            break
        held.append(line)
    return "\n".join(ln.strip() for ln in held).strip()


def input_line(text: str) -> str | None:
    """What the input box holds ("" when empty), or None when no box shows."""
    if classify(text) is not None:
        return None
    lines = text.splitlines()
    marked = _marked(lines)
    if not marked:
        return None
    held = _held(lines, marked[-1])
    return "" if held in PLACEHOLDERS else held


def input_ready(text: str) -> bool:
    """True when the input box shows and no blocking screen does: a paste lands in it."""
    return input_line(text) is not None


def unsent(text: str, pasted: str) -> bool:
    """True when the box still holds `pasted` (collapsed or as its first line)."""
    held = input_line(text)
    return bool(held) and shows_paste((held or "").splitlines()[0], pasted, PASTED_MARK)


def _messages(text: str) -> list[str]:
    """The sent messages the visible transcript shows: marked lines above the box."""
    lines = text.splitlines()
    marked = _marked(lines)
    shown = (lines[i].lstrip()[len(MARK) :].strip() for i in marked[:-1])
    return [line for line in shown if line]


def echoes(text: str, pasted: str) -> int:
    """How many sent messages in the visible transcript look like `pasted`."""
    return sum(1 for shown in _messages(text) if shows_paste(shown, pasted, PASTED_MARK))


def transcript_messages(text: str) -> int:
    return len(_messages(text))


CODEX_SCREENS = ScreenReader(
    classify=classify,
    input_ready=input_ready,
    input_line=input_line,
    unsent=unsent,
    echoes=echoes,
    transcript_messages=transcript_messages,
    hints=HINTS,
)
