"""What a model response cost, read from the answer as it passes: its API's `usage`.

A streamed Messages answer carries it twice: `message_start` holds the input side (and a
placeholder output count), `message_delta` the final, cumulative counts; a field the delta
carries replaces the start's. A streamed Responses answer carries it once, in
`response.completed` (`wires.py` says which events of which API hold counts and how they
read). A non-streamed answer holds it once, in its JSON body. `StreamMeter` is fed the
stream's bytes as they are relayed and only parses the lines that matter, so counting costs
a stream next to nothing. `Tally` sums what was read per work item until the reporter drains
it. Pure but for `Tally`'s lock.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, fields
from typing import Any

from app.gateway.wires import MESSAGES, Wire, messages_counts

# The Messages API's names for its token counts.
COUNTED = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
# A line longer than this is a content delta, never one of the events read here. (A
# Responses stream's last event repeats the whole output, so its line may be long: it is
# still read when it fits this bound.)
_MAX_LINE = 2 * 1024 * 1024


@dataclass(frozen=True)
class Usage:
    """Token counts and the number of model requests they came from."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(self)))

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def empty(self) -> bool:
        return self == Usage()


def counts_of(usage: Any) -> dict[str, int]:
    """The counted fields a Messages API `usage` object holds (others, and nonsense, left out)."""
    return messages_counts(usage)


def one_request(counts: dict[str, int]) -> Usage | None:
    """One answered request's usage, or None when it reported none."""
    if not counts:
        return None
    return Usage(**{name: counts.get(name, 0) for name in COUNTED}, requests=1)


def usage_of_body(body: bytes, wire: Wire = MESSAGES) -> Usage | None:
    """The usage of a whole (non-streamed) response body of `wire`'s API."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return one_request(wire.body_counts(data.get("usage"))) if isinstance(data, dict) else None


class StreamMeter:
    """Reads the usage of an SSE stream fed in arbitrary chunks."""

    def __init__(self, wire: Wire = MESSAGES) -> None:
        self._wire = wire
        self._partial = b""
        self._skipping = False  # inside an over-long line: drop it up to its end
        self._event = b""  # the `event:` name of the event being read
        self._counts: dict[str, int] = {}

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
        wanted = self._wire.events
        if self._event not in wanted and (self._event or not any(w in line for w in wanted)):
            return
        try:
            data = json.loads(line[5:])
        except ValueError:
            return
        if not isinstance(data, dict):
            return
        counts = self._wire.event_counts(data)
        if counts:
            self._counts.update(counts)

    def result(self) -> Usage | None:
        """The stream's usage so far (its last line need not have ended)."""
        if self._partial and not self._skipping:
            self._line(self._partial.rstrip(b"\r"))
            self._partial = b""
        return one_request(self._counts)


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
