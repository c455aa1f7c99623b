"""What a model response cost, read from the answer as it passes: the Messages API's `usage`.

A streamed answer carries it twice: `message_start` holds the input side (and a placeholder
output count), `message_delta` the final, cumulative counts; a field the delta carries
replaces the start's. Each `content_block_start` of a `tool_use` block is one tool call the
harness will make. A non-streamed answer holds it once, in its JSON body. `StreamMeter`
is fed the stream's bytes as they are relayed and only parses the two lines that matter, so
counting costs a stream next to nothing. `Tally` sums what was read per work item until the
reporter drains it. Pure but for `Tally`'s lock.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, fields
from typing import Any

# The Messages API's names for its token counts.
COUNTED = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
# A line longer than this is a content delta, never one of the two events read here.
_MAX_LINE = 256 * 1024
_WANTED = (b"message_start", b"message_delta")
_BLOCK_START = b"content_block_start"
_TOOL_USE = b'"tool_use"'  # the block type; a server tool's is `"server_tool_use"`


@dataclass(frozen=True)
class Usage:
    """Token counts and the number of model requests they came from."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    requests: int = 0
    tool_calls: int = 0  # `tool_use` blocks the answers held: the harness's tool calls

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def empty(self) -> bool:
        return self == Usage()


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def counts_of(usage: Any) -> dict[str, int]:
    """The counted fields a `usage` object holds (others, and nonsense, are left out)."""
    if not isinstance(usage, dict):
        return {}
    found = {name: _count(usage.get(name)) for name in COUNTED}
    return {name: value for name, value in found.items() if value is not None}


def one_request(counts: dict[str, int], tool_calls: int = 0) -> Usage | None:
    """One answered request's usage, or None when it reported none."""
    if not counts:
        return None
    return Usage(
        **{name: counts.get(name, 0) for name in COUNTED}, requests=1, tool_calls=tool_calls
    )


def usage_of_body(body: bytes) -> Usage | None:
    """The usage of a whole (non-streamed) Messages response body."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    content = data.get("content")
    blocks = content if isinstance(content, list) else []
    tools = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use")
    return one_request(counts_of(data.get("usage")), tools)


class StreamMeter:
    """Reads the usage of an SSE stream fed in arbitrary chunks."""

    def __init__(self) -> None:
        self._partial = b""
        self._skipping = False  # inside an over-long line: drop it up to its end
        self._event = b""  # the `event:` name of the event being read
        self._counts: dict[str, int] = {}
        self._tools = 0

    def feed(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        lines[0] = self._partial + lines[0]
        self._partial = lines.pop()
        for line in lines:
            if self._skipping:
                self._skipping = False
                continue
            self._line(line)
        if len(self._partial) > _MAX_LINE:
            self._partial, self._skipping = b"", True

    def _line(self, line: bytes) -> None:
        if line.startswith(b"event:"):
            self._event = line[6:].strip()
            return
        if not line.strip():
            self._event = b""
            return
        if not line.startswith(b"data:"):
            return
        if self._event == _BLOCK_START:  # counted without parsing: only a tool's start says so
            self._tools += _TOOL_USE in line
            return
        if self._event not in _WANTED and (self._event or not any(w in line for w in _WANTED)):
            return
        try:
            data = json.loads(line[5:])
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        if data.get("type") == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                self._counts.update(counts_of(message.get("usage")))
        elif data.get("type") == "message_delta":
            self._counts.update(counts_of(data.get("usage")))

    def result(self) -> Usage | None:
        """The stream's usage so far (its last line need not have ended)."""
        if self._partial and not self._skipping:
            self._line(self._partial.rstrip(b"\r"))
            self._partial = b""
        return one_request(self._counts, self._tools)


class Tally:
    """Usage per work item since the last drain; shared by the relay and the reporter."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Usage] = {}

    def add(self, work_item: str, usage: Usage) -> None:
        with self._lock:
            self._open[work_item] = self._open.get(work_item, Usage()) + usage

    def drain(self, work_item: str | None = None) -> dict[str, Usage]:
        """Take what was counted (for one item, or all) and start again from zero."""
        with self._lock:
            if work_item is None:
                taken, self._open = self._open, {}
                return taken
            found = self._open.pop(work_item, None)
            return {work_item: found} if found is not None else {}
