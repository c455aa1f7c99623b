"""What a model response cost, read from the answer as it passes: its API's `usage`.

A streamed Messages answer carries it twice: `message_start` holds the input side (and a
placeholder output count), `message_delta` the final, cumulative counts; a field the delta
carries replaces the start's. A streamed Responses answer carries it once, in
`response.completed` (`wires.py` says which events of which API hold counts, how they read,
and which event starts one tool call the harness will make). A non-streamed answer holds it
once, in its JSON body. `StreamMeter` is fed the stream's bytes as they are relayed and only
parses the lines that matter, so counting costs a stream next to nothing. `Tally` sums what
was read per work item until the reporter drains it. Pure but for `Tally`'s lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields

import orjson

from app.gateway.wires import MESSAGES, Wire

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
    tool_calls: int = 0  # `tool_use` blocks the answers held: the harness's tool calls
    active_ms: int = 0  # how long the harness was working (`Tally`): a turn, tools included

    def __add__(self, other: Usage) -> Usage:
        return Usage(*[getattr(self, name) + getattr(other, name) for name in _USAGE_FIELDS])

    def to_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _USAGE_FIELDS}

    @property
    def empty(self) -> bool:
        return self == Usage()


_USAGE_FIELDS = tuple(f.name for f in fields(Usage))


def one_request(counts: dict[str, int], tool_calls: int = 0) -> Usage | None:
    """One answered request's usage, or None when it reported none."""
    if not counts:
        return None
    return Usage(
        **{name: counts.get(name, 0) for name in COUNTED}, requests=1, tool_calls=tool_calls
    )


def usage_of_body(body: bytes, wire: Wire = MESSAGES) -> Usage | None:
    """The usage of a whole (non-streamed) response body of `wire`'s API."""
    try:
        data = orjson.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return one_request(wire.body_counts(data.get("usage")), wire.body_tools(data))


class StreamMeter:
    """Reads the usage of an SSE stream fed in arbitrary chunks."""

    def __init__(self, wire: Wire = MESSAGES) -> None:
        self._wire = wire
        self._partial = b""
        self._skipping = False  # inside an over-long line: drop it up to its end
        self._event = b""  # the `event:` name of the event being read
        self._counts: dict[str, int] = {}
        self._tools = 0

    def feed(self, chunk: bytes) -> None:
        lines = chunk.split(b"\n")
        lines[0] = self._partial + lines[0]
        self._partial = lines.pop()
        if self._skipping and lines:
            self._skipping = False
            del lines[0]
        self._read(lines)
        if len(self._partial) > _MAX_LINE:
            self._partial, self._skipping = b"", True

    def _read(self, lines: list[bytes]) -> None:
        """Whole lines, in one loop: a stream has many, and all but a few are passed over."""
        wire = self._wire
        event, tool_event, wanted = self._event, wire.tool_event, wire.events
        for line in lines:
            if line.startswith(b"event:"):
                event = line[6:].strip()
            elif line.startswith(b"data:"):
                if event == tool_event:  # counted without parsing: only a tool's start says so
                    self._tools += wire.tool_marker in line
                elif event in wanted or (not event and any(w in line for w in wanted)):
                    self._data(line[5:])
            elif not line.strip():
                event = b""
        self._event = event

    def _data(self, data: bytes) -> None:
        try:
            parsed = orjson.loads(data)
        except ValueError:
            return
        if not isinstance(parsed, dict):
            return
        counts = self._wire.event_counts(parsed)
        if counts:
            self._counts.update(counts)

    def result(self) -> Usage | None:
        """The stream's usage so far (its last line need not have ended)."""
        if self._partial and not self._skipping:
            self._read([self._partial.rstrip(b"\r")])
            self._partial = b""
        return one_request(self._counts, self._tools)


class Tally:
    """Usage per work item since the last drain; shared by the relay and the reporter.

    It also keeps how long each item's harness was working: from a request, while answers
    are awaited and while the tools an answer asked for run (until the next request), to an
    answer that asks for no tool with nothing else in flight — a turn's end, where the
    harness waits for a person (a side request ending meanwhile may close it early: the
    figure is close, not exact)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Usage] = {}
        self._clock = clock
        self._working: dict[str, float] = {}  # item → since when its harness works
        self._in_flight: dict[str, int] = {}
        self._active: dict[str, float] = {}  # seconds not drained yet

    def add(self, work_item_id: str, usage: Usage) -> None:
        with self._lock:
            self._open[work_item_id] = self._open.get(work_item_id, Usage()) + usage

    def started(self, work_item_id: str) -> None:
        """A request of `work_item_id` arrived: its harness works (if it was not already)."""
        with self._lock:
            self._in_flight[work_item_id] = self._in_flight.get(work_item_id, 0) + 1
            self._working.setdefault(work_item_id, self._clock())

    def finished(self, work_item_id: str, tools: bool) -> None:
        """A request ended; without tool calls to run and nothing else in flight, so did
        the harness's turn."""
        with self._lock:
            left = self._in_flight.get(work_item_id, 1) - 1
            if left > 0:
                self._in_flight[work_item_id] = left
                return
            self._in_flight.pop(work_item_id, None)
            since = self._working.get(work_item_id)
            if tools or since is None:
                return
            del self._working[work_item_id]
            elapsed = max(0.0, self._clock() - since)
            self._active[work_item_id] = self._active.get(work_item_id, 0.0) + elapsed

    def close(self, work_item_id: str) -> None:
        """`work_item_id`'s session ended: a turn it was in ends now."""
        with self._lock:
            self._in_flight.pop(work_item_id, None)
            since = self._working.pop(work_item_id, None)
            if since is not None:
                elapsed = max(0.0, self._clock() - since)
                self._active[work_item_id] = self._active.get(work_item_id, 0.0) + elapsed

    def drain(self, work_item_id: str | None = None) -> dict[str, Usage]:
        """Take what was counted (for one item, or all) and start again from zero; a turn
        still going is counted up to now."""
        with self._lock:
            now = self._clock()
            for item, since in self._working.items():
                if work_item_id is None or item == work_item_id:
                    self._active[item] = self._active.get(item, 0.0) + max(0.0, now - since)
                    self._working[item] = now
            items = set(self._open) | set(self._active)
            chosen = items if work_item_id is None else items & {work_item_id}
            taken: dict[str, Usage] = {}
            for item in chosen:
                usage = self._open.pop(item, Usage())
                active = int(self._active.pop(item, 0.0) * 1000)
                if active or not usage.empty:
                    taken[item] = Usage(
                        **{**usage.to_json(), "active_ms": usage.active_ms + active}
                    )
            return taken


# A JSON answer larger than this is relayed but not read for its usage.
MAX_METERED_JSON = 8 * 1024 * 1024


def meter_for(content_type: str, wire: Wire) -> Callable[[bytes | None], Usage | None]:
    """A reader fed each chunk, then None for the usage it read."""
    if content_type.startswith("text/event-stream"):
        meter = StreamMeter(wire)

        def stream(chunk: bytes | None) -> Usage | None:
            if chunk is None:
                return meter.result()
            meter.feed(chunk)
            return None

        return stream
    if content_type.startswith("application/json"):
        parts: list[bytes] = []
        size = [0]

        def whole(chunk: bytes | None) -> Usage | None:
            if chunk is None:
                if size[0] > MAX_METERED_JSON:
                    return None
                return usage_of_body(b"".join(parts), wire)
            size[0] += len(chunk)
            if size[0] <= MAX_METERED_JSON:
                parts.append(chunk)
            return None

        return whole
    return lambda chunk: None
