"""The spawner's record of every session it launched: `sessions.json` in its state dir.

A record holds what the session was launched with — harness, model, effort and
`harness_args` (the operator's arguments plus the choice, WITHOUT the deny token, so adding
or dropping that token never counts as drift) — and where it runs. Drift is the record
compared with what would be resolved now; `drift` is pure.
"""

from __future__ import annotations

import fcntl
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from app.files import write_json
from app.protocol import current_record
from app.spawner.argv import Launch


class SessionState(StrEnum):
    RUNNING = "running"
    STALLED = "stalled"  # the pane shows a prompt that waits on a keypress
    EXITED = "exited"  # the process ended
    STOPPED = "stopped"  # ended on purpose (issue closed, operator)


LIVE_STATES = frozenset({SessionState.RUNNING, SessionState.STALLED})


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True)
class SessionRecord:
    work_item_id: str
    harness: str
    model: str
    effort: str
    harness_args: list[str]
    session_id: str
    tmux_session: str
    tmux_target: str
    checkout: str
    interaction: str
    state: str = SessionState.RUNNING.value
    spec_id: str = ""
    repo: str = ""
    issue_number: int = 0
    clone_url: str = ""
    standing: bool = False
    stall: str = ""
    stall_fingerprint: str = ""  # the question on screen, when the stall is one (dialogs.py)
    pending: str = ""  # a first message not pasted yet (the session was not ready for it)
    # A paste not yet seen sent (input_box.py): the watchdog follows it through.
    unsent: str = ""
    unsent_before: int = 0  # transcript lines like it before the paste
    unsent_first: bool = False  # the session's first message
    unsent_tries: int = 0  # Enters pressed or pastes repeated for it so far
    unsent_since: str = ""
    exit_status: int | None = None
    started_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in current_record(data).items() if k in known})

    def with_changes(self, **changes: Any) -> SessionRecord:
        return replace(self, updated_at=_now(), **changes)


def record_for(
    launch: Launch, work_item_id: str, tmux_session: str, target: str, checkout: Path, **extra: Any
) -> SessionRecord:
    """The record of a launch: the recorded arguments exclude the deny token by construction."""
    return SessionRecord(
        work_item_id=work_item_id,
        harness=launch.harness,
        model=launch.model,
        effort=launch.effort,
        harness_args=list(launch.harness_args),
        session_id=launch.session_id,
        tmux_session=tmux_session,
        tmux_target=target,
        checkout=str(checkout),
        interaction=launch.interaction,
        **extra,
    )


@dataclass(frozen=True)
class Drift:
    """How a live session differs from what would be launched now."""

    old: dict[str, Any]
    new: dict[str, Any]


def drift(record: SessionRecord, now: Launch) -> Drift | None:
    """The differing launch facts between `record` and `now`, or None when they agree."""
    keys = ("harness", "model", "effort", "harness_args")
    old = {k: getattr(record, k) for k in keys}
    new = {
        "harness": now.harness,
        "model": now.model,
        "effort": now.effort,
        "harness_args": list(now.harness_args),
    }
    changed = [k for k in keys if old[k] != new[k]]
    if not changed:
        return None
    return Drift({k: old[k] for k in changed}, {k: new[k] for k in changed})


class Registry:
    """Session records by work item in one JSON file, shared by the agent and the CLI.

    Every change is read-modify-write under an exclusive `flock`, and the file is replaced
    atomically, so two processes (the agent and `the-loop standing start`) never lose each
    other's records and a reader never sees half a file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._thread_lock = threading.Lock()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._thread_lock, open(self.path.with_name(self.path.name + ".lock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _load(self) -> dict[str, SessionRecord]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ValueError(f"{self.path}: not a session registry ({exc})") from exc
        sessions = data.get("sessions", {}) if isinstance(data, dict) else {}
        return {k: SessionRecord.from_dict(v) for k, v in sessions.items() if isinstance(v, dict)}

    def _save(self, records: dict[str, SessionRecord]) -> None:
        body = {"sessions": {k: r.to_dict() for k, r in records.items()}}
        write_json(self.path, body, 0o600)

    def get(self, work_item_id: str) -> SessionRecord | None:
        return self._load().get(work_item_id)

    def all(self) -> list[SessionRecord]:
        return list(self._load().values())

    def put(self, record: SessionRecord) -> SessionRecord:
        with self._locked():
            records = self._load()
            records[record.work_item_id] = record
            self._save(records)
        return record

    def update(self, work_item_id: str, **changes: Any) -> SessionRecord | None:
        """Change some fields of a record (None when there is none)."""
        with self._locked():
            records = self._load()
            current = records.get(work_item_id)
            if current is None:
                return None
            records[work_item_id] = updated = current.with_changes(**changes)
            self._save(records)
            return updated

    def remove(self, work_item_id: str) -> None:
        with self._locked():
            records = self._load()
            if records.pop(work_item_id, None) is not None:
                self._save(records)
