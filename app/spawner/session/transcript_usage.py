"""Model usage read from a harness's own transcript, for sessions that reach the model
without the spawner's gateway (a login shared with `shareLogin` and no key): nobody counted
their answers as they passed, so their usage is read back from what the harness recorded.

Each harness has one `Reader` in `READERS` (keyed by the harness's executable name): its
`usage(session home, session id) -> Usage | None` and its transcript's size; they all return
the gateway's `Usage`, so the App cannot tell one source from another. Claude Code writes
`~/.claude/projects/<dir>/<session>.jsonl`, one JSON object per line, an answer's
`message.usage` repeated on each of its lines: an answer counts once (by `message.id`), its
largest counts kept. The transcript is the session's to write, so it is data: found and
opened without following a link at any step (`files.open_within`), read up to a bound, each
line parsed on its own (a broken or oversized line is skipped), every count checked.

A resumed session appends to the same transcript, so what was reported per session id is
kept in the spawner's state directory and only the growth is reported; the spawner reads a
live session's transcript about once a minute (when it grew) and an ended one's at its end.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.config import OperatorConfig
from app.files import open_within, write_json
from app.gateway import COUNTED, Usage, messages_counts
from app.protocol import USAGE_EVENT
from app.spawner.harness.claude_home import transcript_path
from app.spawner.registry import SessionRecord
from app.spawner.session.leftovers import session_home

MAX_BYTES = 64 * 1024 * 1024  # of one transcript read; past it the rest is not counted
MAX_LINE = 1024 * 1024
MAX_ANSWERS = 200_000  # answers remembered at once while reading one transcript
MAX_COUNT = 10**9  # one answer's count above this is nonsense
KEPT_FILE = "transcript-usage.json"
SIZE_KEY = "transcript_bytes"  # the size last read: an unchanged transcript is not re-read
Read = Callable[[Path, str], Usage | None]
Size = Callable[[Path, str], int | None]
_LOCK = threading.Lock()  # the kept file: the watchdog and a stop job may both report
Emit = Callable[..., Any]


def _answer(entry: Any) -> tuple[str, dict[str, int], set[str]] | None:
    """(message id, counts, tool_use ids) of one Claude Code transcript line, or None."""
    if not isinstance(entry, dict) or entry.get("type") != "assistant":
        return None
    message = entry.get("message")
    if not isinstance(message, dict) or not isinstance(message.get("id"), str):
        return None
    counts = {k: v for k, v in messages_counts(message.get("usage")).items() if v <= MAX_COUNT}
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    tools = {
        str(b.get("id"))[:128]
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("id")
    }
    return message["id"][:128], counts, tools


def claude_counts(lines: Iterable[bytes]) -> Usage:
    """What a Claude Code transcript's answers used (pure): each answer once."""
    answers: dict[str, dict[str, int]] = {}
    tools: set[str] = set()
    for line in lines:
        if len(line) > MAX_LINE:
            continue
        try:
            found = _answer(json.loads(line))
        except (ValueError, RecursionError):
            continue
        if found is None:
            continue
        key, counts, calls = found
        if key not in answers and len(answers) >= MAX_ANSWERS:
            continue
        seen = answers.setdefault(key, {})
        for name, value in counts.items():
            seen[name] = max(seen.get(name, 0), value)
        if len(tools) < MAX_ANSWERS:
            tools |= calls
    total = Usage()
    for counts in answers.values():
        if counts:
            total += Usage(**{n: counts.get(n, 0) for n in COUNTED}, requests=1)
    return Usage(**{**total.to_json(), "tool_calls": len(tools)})


def _bounded_lines(fh: Any) -> Iterable[bytes]:
    read = 0
    while read < MAX_BYTES:
        line = fh.readline(MAX_LINE + 1)
        if not line:
            return
        read += len(line)
        if len(line) > MAX_LINE:  # the rest of an over-long line is skipped too
            while line and not line.endswith(b"\n"):
                line = fh.readline(MAX_LINE)
                read += len(line)
            continue
        yield line


def claude_size(home: Path, session_id: str) -> int | None:
    """The size of Claude Code's transcript of `session_id` (no link followed), or None."""
    found = transcript_path(home, session_id)
    try:
        return os.lstat(found).st_size if found is not None else None
    except OSError:
        return None


def claude_usage(home: Path, session_id: str) -> Usage | None:
    """Claude Code's usage for `session_id` under `home`, or None without a transcript."""
    found = transcript_path(home, session_id)
    if found is None:
        return None
    try:
        relative = found.relative_to(home)
        with open_within(home, relative.as_posix()) as fh:
            return claude_counts(_bounded_lines(fh))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Reader:
    """One harness's transcript: what it says was used, and its size (a transcript that has
    not grown is not read again)."""

    usage: Read
    size: Size


READERS: dict[str, Reader] = {"claude": Reader(claude_usage, claude_size)}


def reader_for(name: str, executable: str) -> Reader | None:
    """The usage reader of harness `name` run as `executable` (a path or a command name)."""
    return READERS.get(os.path.basename(executable)) or READERS.get(name)


class TranscriptUsage:
    """Reports what sessions used, read from their transcripts, as `session.usage`."""

    def __init__(self, state_dir: Path, emit: Emit) -> None:
        self.kept = state_dir / KEPT_FILE
        self.emit = emit

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.kept.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def report(
        self, reader: Reader, work_item_id: str, home: Path, session_id: str
    ) -> Usage | None:
        """Emit what `session_id` used since it was last reported; that growth, or None."""
        with _LOCK:
            kept = self._load()
            before = kept.get(session_id)
            before = before if isinstance(before, dict) else {}
            size = reader.size(home, session_id)
            if size is not None and before.get(SIZE_KEY) == size:
                return Usage()  # the transcript has not grown: nothing new to read
            used = reader.usage(home, session_id)
            if used is None:
                return None
            now = used.to_json()
            grown = {k: max(0, v - int(before.get(k) or 0)) for k, v in now.items()}
            if any(grown.values()):
                self.emit(USAGE_EVENT, work_item_id, **grown, source="transcript")
            kept[session_id] = {**now, SIZE_KEY: size}
            write_json(self.kept, kept, 0o600)
        return Usage(**grown)


def report_ended(
    config: OperatorConfig, real_home: Path, state_dir: Path, emit: Emit, record: SessionRecord
) -> Usage | None:
    """Report what an ended session used, read from its harness's transcript."""
    harness = config.harness(record.harness)
    reader = reader_for(record.harness, harness.executable if harness else record.harness)
    if reader is None or record.standing:
        return None
    home = session_home(config, real_home, state_dir, record.work_item_id)
    meter = TranscriptUsage(state_dir, emit)
    return meter.report(reader, record.work_item_id, home, record.session_id)
