"""The end of a CI job's log as a session is shown it (`the-loop checks log <id>`), pure.

A job log is a stranger's text: it is read as bytes, never run or followed. What a session
sees of it is bounded twice — its last `MAX_LOG_LINES` lines and at most `MAX_LOG_BYTES`
bytes of them — and cleaned to plain lines: terminal escape sequences (colours, cursor moves,
title changes) and other control characters are removed, so a log cannot drive the session's
terminal, and carriage returns end lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_LOG_LINES = 2000
MAX_LOG_BYTES = 256 * 1024

# CSI (ESC [ … final), OSC (ESC ] … BEL or ESC \), and any other two-byte escape.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b.?")
# C0 controls but tab and newline, DEL and the C1 controls.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class LogTail:
    """What is shown of a log: its `text` (whole lines), how many `lines` that is, and
    whether lines before them were left out (`cut`)."""

    text: str
    lines: int
    cut: bool


def clean_log_text(text: str) -> str:
    """`text` as plain lines: escapes and control characters out, line ends as `\\n`."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def log_tail(
    data: bytes,
    *,
    max_lines: int = MAX_LOG_LINES,
    max_bytes: int = MAX_LOG_BYTES,
    began_earlier: bool = False,
) -> LogTail:
    """The last lines of the log whose end is `data`, within both bounds. `began_earlier`
    says `data` is only the end of the log (the reader kept no more); a line cut in two by
    either bound is left out whole."""
    cut, mid_line = began_earlier, began_earlier
    if len(data) > max_bytes:
        cut, mid_line = True, data[-max_bytes - 1 : -max_bytes] != b"\n"
        data = data[-max_bytes:]
    lines = clean_log_text(data.decode("utf-8", errors="replace")).split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the log's last newline ends a line; it starts none
    if mid_line and lines:
        lines.pop(0)  # its start lies before what was kept
    if len(lines) > max_lines:
        lines, cut = lines[-max_lines:], True
    return LogTail(text="\n".join(lines) + ("\n" if lines else ""), lines=len(lines), cut=cut)
