"""Reading a question Claude Code shows in its pane, and the keystrokes that pick an option
(pure: text in, values out).

The screens this reads were captured from the real binaries (tests/data/claude-screens/,
tests/data/codex-screens/: Codex marks its cursor `\u203a` and names Enter in lower case): a
permission prompt ("Do you want to create hello.txt?" with numbered options), a question
menu (numbered options with descriptions under them, "Enter to select"), and the workspace
trust dialog (unnumbered options). In all of them the option under the cursor is marked
the prompt mark. Answering moves the cursor to the chosen option with arrow keys and presses Enter:
key names only, never typed text, so an answer can never become input to the agent.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from app.spawner.spawner_errors import SpawnerError

CURSOR = "\u276f"  # the prompt mark Claude Code puts before the option under the cursor
CURSORS = (CURSOR, "\u203a")  # …and Codex's
_NUMBERED = re.compile(r"^\s*(?:[\u276f\u203a]\s*)?(\d{1,2})\.\s+(\S.*?)\s*$")
_FOOTER = (
    "Esc to cancel",
    "Enter to select",
    "Enter to confirm",
    "enter to confirm",  # Codex: "Press enter to confirm or esc to cancel"
    "enter confirm",  # Codex's hooks review
    "enter continue",  # Codex's trust dialog
)
# Options that wait for typed text: choosing one leaves the session waiting anyway.
NEEDS_TEXT = frozenset({"Type something."})
MAX_OPTIONS = 9


@dataclass(frozen=True)
class Dialog:
    """A question on screen: its text, the options in order, and where the cursor is."""

    question: str
    options: tuple[str, ...]
    cursor: int  # index into options

    @property
    def fingerprint(self) -> str:
        """Identifies this question, so an answer is sent only to the screen it was for."""
        text = "\n".join((self.question, *self.options))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _footer_index(lines: list[str]) -> int | None:
    for index in range(len(lines) - 1, -1, -1):
        if any(f in lines[index] for f in _FOOTER):
            return index
    return None


def _numbered(lines: list[str]) -> tuple[list[str], int, int] | None:
    """(options, cursor, index of the first option line) of a numbered list ending the
    screen, or None."""
    options: list[str] = []
    cursor, first = 0, -1
    for index, line in enumerate(lines):
        match = _NUMBERED.match(line)
        if match and int(match.group(1)) == len(options) + 1:
            if not options:
                first = index
            if any(c in line.split(match.group(1) + ".", 1)[0] for c in CURSORS):
                cursor = len(options)
            options.append(match.group(2))
    return (options, cursor, first) if len(options) >= 2 else None


def _unnumbered(lines: list[str]) -> tuple[list[str], int, int] | None:
    """The options of a list whose cursor line is the prompt mark and a label, and whose
    other lines are indented labels directly around it (the trust dialog)."""
    marked = [i for i, line in enumerate(lines) if line.lstrip().startswith(CURSOR)]
    if not marked:
        return None
    at = marked[-1]
    start = at
    while start > 0 and lines[start - 1].startswith("   ") and lines[start - 1].strip():
        start -= 1
    end = at + 1
    while end < len(lines) and lines[end].startswith("   ") and lines[end].strip():
        end += 1
    options = [lines[i].strip().lstrip(CURSOR).strip() for i in range(start, end)]
    return (options, at - start, start) if len(options) >= 2 else None


def parse_dialog(screen: str) -> Dialog | None:
    """The question `screen` waits on, or None when it shows no question with options."""
    lines = [line.rstrip() for line in screen.splitlines()]
    footer = _footer_index(lines)
    if footer is None:
        return None
    body = [line for line in lines[:footer] if line.strip()]
    found = _numbered(body) or _unnumbered(body)
    if found is None:
        return None
    options, cursor, first = found
    above = [line.strip() for line in body[:first] if "?" in line]
    question = above[-1][: above[-1].rindex("?") + 1][:300] if above else ""
    return Dialog(question=question, options=tuple(options[:MAX_OPTIONS]), cursor=cursor)


class AnswerRefused(SpawnerError, ValueError):
    """The choice cannot be sent; the message says why in one line."""


def keystrokes(dialog: Dialog, choice: int) -> list[str]:
    """The tmux key names that pick option `choice` (1-based) of `dialog`."""
    if not 1 <= choice <= len(dialog.options):
        raise AnswerRefused(
            f"there is no option {choice}; the screen offers 1 to {len(dialog.options)}"
        )
    label = dialog.options[choice - 1]
    if label in NEEDS_TEXT:
        raise AnswerRefused(f"option {choice} ({label!r}) needs typed text; answer in tmux")
    steps = choice - 1 - dialog.cursor
    return ["Down" if steps > 0 else "Up"] * abs(steps) + ["Enter"]
