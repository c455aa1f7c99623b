"""What may be pasted into a session: text, never terminal control.

A follow-up is delivered as a bracketed paste, which ends at the first `ESC [ 2 0 1 ~`; any
text after that, and any other control character, would reach the harness as keystrokes
(Enter, Ctrl-C, Shift-Tab, an escape sequence). So every C0 control character except tab
and newline, DEL, and every C1 control character is removed before a paste. Line endings are
kept as newlines (`\\r\\n` and a lone `\\r` both become `\\n`). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE_ENDINGS = re.compile(r"\r\n?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class PasteText:
    """Text fit to paste, and how many control characters were taken out of it."""

    text: str
    removed: int = 0


def paste_text(text: str) -> PasteText:
    """`text` with line endings made `\\n` and every other control character removed."""
    lines = _LINE_ENDINGS.sub("\n", text)
    clean, removed = _CONTROL.subn("", lines)
    return PasteText(clean, removed)
