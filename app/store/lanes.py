"""Fair turns in the inbox: one noisy issue cannot hold up every other.

Each delivery belongs to a lane: the issue or pull request it is about (`owner/repo#n`), else
its repository, else none (installation events). Workers claim deliveries in order of their
`turn`, then of arrival. A turn is a time in milliseconds: a lane's delivery takes the later
of now and its lane's previous turn plus QUANTUM_MS. A lane that sends a few deliveries a
second is served in arrival order like everything else; a lane flooding the App (a bot
commenting thousands of times on one issue, a storm of check runs) pushes only its own
deliveries ahead in time, so a label on another issue is handled next rather than after the
flood. Nothing starves: the flood is served whenever nothing has an earlier turn, and turns
only order the queue, they never delay a delivery while workers are idle.

Turns are kept per ingest writer, in memory (`Turns`): after a restart, or across replicas,
a lane starts again from now. Deliveries of one lane were never strictly ordered anyway
(several workers handle in parallel); a restart only costs a flood its place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

QUANTUM_MS = 100  # a lane's share: one delivery per this many milliseconds at present time
MAX_LANES = 10_000  # lanes remembered before those already back at present time are dropped


def lane_of(payload: Mapping[str, Any]) -> str:
    """The lane of a webhook payload: its issue or pull request, else its repository, else
    "" (no lane: served at arrival)."""
    repository = payload.get("repository")
    repo = repository.get("full_name") if isinstance(repository, Mapping) else None
    if not isinstance(repo, str) or not repo:
        return ""
    for key in ("issue", "pull_request"):
        thread = payload.get(key)
        if isinstance(thread, Mapping) and isinstance(thread.get("number"), int):
            return f"{repo}#{thread['number']}"
    number = payload.get("number")
    return f"{repo}#{number}" if isinstance(number, int) else repo


class Turns:
    """The last turn given to each lane by one writer (used from its one thread)."""

    def __init__(self, quantum_ms: int = QUANTUM_MS, max_lanes: int = MAX_LANES) -> None:
        self.quantum_ms = quantum_ms
        self.max_lanes = max_lanes
        self._last: dict[str, int] = {}

    def take(self, lane: str, now_ms: int) -> int:
        """The turn of the next delivery of `lane` arriving at `now_ms`."""
        if not lane:
            return now_ms
        previous = self._last.get(lane)
        turn = now_ms if previous is None else max(now_ms, previous + self.quantum_ms)
        self._last[lane] = turn
        if len(self._last) > self.max_lanes:
            self._forget_caught_up(now_ms)
        return turn

    def _forget_caught_up(self, now_ms: int) -> None:
        """Drop lanes whose next turn would be now anyway: forgetting them changes nothing."""
        horizon = now_ms - self.quantum_ms
        self._last = {lane: turn for lane, turn in self._last.items() if turn > horizon}

    def __len__(self) -> int:
        return len(self._last)
