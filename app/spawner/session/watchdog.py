"""Seeing what a session is doing without a human attached, and acting on it.

`Watchdog.tick` looks at every live session once: a dead pane becomes `session.exited`, a
blocking screen `session.stalled` (naming which), and a stalled pane that moved on
`session.unstalled` — so nothing waiting on a keypress is reported as running. A session
whose first message could not be pasted yet (it was still starting, or stopped at a dialog)
gets it once its input box shows, and a paste not yet seen sent is followed through
(input_box.py). `await_input` is the same look, repeated until a session
just launched is ready for its first message. Each look also reads the session's artifacts
in its checkout, from the host and without following links (`evidence.py`), and reports
them as `session.evidence` whenever they change: what the App moves the item's phase on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from app import graph
from app.spawner.harness import screens_of
from app.spawner.harness.screens import Screen, last_lines
from app.spawner.locks import ItemLocks
from app.spawner.registry import Registry, SessionRecord, SessionState
from app.spawner.session.dialogs import parse_dialog
from app.spawner.session.input_box import Emit, follow_through, paste_first_message
from app.spawner.session.leftovers import Describe
from app.spawner.session.tmux import TmuxError, TmuxRunner
from app.spawner.workspace.evidence import host_evidence

log = logging.getLogger(__name__)

# Why a session that outlived the spawner that started it ended (`session.exited`'s reason).
LEFT_BEHIND = "left running by an earlier run of this spawner; ended as the spawner started"

POLL_SECONDS = 0.025  # between looks at a session just launched (one tmux call each)


def report_stall(
    registry: Registry, emit: Emit, record: SessionRecord, screen: Screen, text: str = ""
) -> None:
    """Mark `record` stalled at `screen` and say so, unless it already was at that screen
    with the same question. A question the screen's `text` shows with options goes with it
    (its `fingerprint` is what an answer must match)."""
    dialog = parse_dialog(text) if text else None
    fingerprint = dialog.fingerprint if dialog else ""
    if (
        record.state == SessionState.STALLED
        and record.stall == screen
        and record.stall_fingerprint == fingerprint
    ):
        return
    registry.update(
        record.work_item_id,
        state=SessionState.STALLED.value,
        stall=screen.value,
        stall_fingerprint=fingerprint,
    )
    question = (
        {"question": dialog.question, "options": list(dialog.options), "fingerprint": fingerprint}
        if dialog
        else {}
    )
    emit(
        "session.stalled",
        record.work_item_id,
        screen=screen.value,
        hint=screens_of(record.harness).hints.get(screen, ""),
        session_id=record.session_id,
        tmux_target=record.tmux_target,
        **question,
    )


class Readiness(StrEnum):
    READY = "ready"  # the input box shows: a paste lands in the input
    BLOCKED = "blocked"  # a screen that waits on a keypress
    EXITED = "exited"  # the process ended (or its pane is gone)
    TIMEOUT = "timeout"  # still starting when the wait ran out


@dataclass(frozen=True)
class Waited:
    state: Readiness
    screen: Screen | None = None
    last_lines: list[str] = field(default_factory=list)
    text: str = ""  # what the pane showed last (a blocking screen, or the ready input box)


def await_input(
    runner: TmuxRunner, record: SessionRecord, timeout: float, poll: float = POLL_SECONDS
) -> Waited:
    """Look at a session just launched until its input box shows, a blocking screen or its
    end does, or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    reader = screens_of(record.harness)
    while True:
        pane, text = runner.look(record.tmux_session)
        if pane is None or pane.owner != record.work_item_id:
            return Waited(Readiness.EXITED)
        if pane.dead:
            try:
                tail = last_lines(runner.capture(record.tmux_session, history=100))
            except TmuxError:  # gone since the look
                return Waited(Readiness.EXITED)
            return Waited(Readiness.EXITED, last_lines=tail)
        screen = reader.classify(text)
        if screen is not None:
            return Waited(Readiness.BLOCKED, screen, text=text)
        if reader.input_ready(text):
            return Waited(Readiness.READY, text=text)
        if time.monotonic() >= deadline:
            return Waited(Readiness.TIMEOUT)
        time.sleep(poll)


class Watchdog:
    """One look at every live session per `tick`; state changes become events."""

    def __init__(
        self,
        runner: TmuxRunner,
        registry: Registry,
        emit: Emit,
        locks: ItemLocks | None = None,
        describe: Describe | None = None,
        ended: Callable[[str], object] | None = None,
    ) -> None:
        self.runner = runner
        self.registry = registry
        self.emit = emit
        self.locks = locks or ItemLocks()
        # What an ended session left behind (its last message, its changed files).
        self.describe = describe
        # Told the work item of every session seen ended (its pass dies); a mapping it returns
        # (what the session's limits counted) joins `session.exited`.
        self.ended = ended
        self._reported: dict[str, tuple[str, dict[str, Any]]] = {}  # item → (session, seen)

    def tick(self) -> None:
        live = [r for r in self.registry.all() if r.live]
        for gone in self._reported.keys() - {r.work_item_id for r in live}:
            del self._reported[gone]  # a relaunch reports what it sees afresh
        if not live:
            return
        every = self.runner.panes()
        # A pane counts as a record's only when it is tagged with the record's work item.
        panes = {
            r.work_item_id: p
            for r in live
            if (p := every.get(r.tmux_session)) is not None and p.owner == r.work_item_id
        }
        running = [pane.session for pane in panes.values() if not pane.dead]
        screens = self.runner.capture_many(running)
        for seen in live:
            with self.locks.try_hold(seen.work_item_id) as held:
                record = self.registry.get(seen.work_item_id) if held else None
                if record is None or not record.live or record.started_at != seen.started_at:
                    continue  # a job is acting on it, or it was relaunched since the look
                pane = panes.get(record.work_item_id)
                if pane is None or pane.dead:
                    self._exited(record, pane.status if pane else None, pane is not None)
                else:
                    self._evidence(record)
                    self._look(record, screens.get(record.tmux_session, ""))

    def _evidence(self, record: SessionRecord) -> None:
        """Report what the host sees of the item's artifacts when it changed (or this
        session has not been told about yet)."""
        if record.standing or not record.spec_id or not record.checkout:
            return
        seen = graph.evidence_fields(host_evidence(Path(record.checkout), record.spec_id))
        if self._reported.get(record.work_item_id) == (record.session_id, seen):
            return
        self._reported[record.work_item_id] = (record.session_id, seen)
        self.emit("session.evidence", record.work_item_id, session_id=record.session_id, **seen)

    def end_left_behind(self, spared: Callable[[str], bool]) -> list[str]:
        """End the live sessions an earlier run of this spawner left on its tmux server (a
        spawner that starts watches nothing it did not start), but those whose work item
        `spared` names (standing sessions: the operator's). Each is said in a warning line
        and reported ended (`session.exited`), so its item is not left counted running.
        A dead pane is left to `tick`, which reports how its process ended. Returns the
        work items ended."""
        live = {r.work_item_id: r for r in self.registry.all() if r.live}
        ended: list[str] = []
        for name, pane in self.runner.panes().items():
            owner = pane.owner
            record = live.get(owner)
            if pane.dead or not owner or spared(owner) or (record and record.standing):
                continue
            if record is not None and record.tmux_session == name:
                self._exited(record, None, True, LEFT_BEHIND)  # its screen is read first
            else:  # started, never recorded: its item is told all the same
                self.emit(
                    "session.exited",
                    owner,
                    tmux_target=f"{self.runner.socket}:{name}",
                    exit_status=None,
                    last_lines=[],
                    reason=LEFT_BEHIND,
                )
            self.runner.kill(name, owner=owner)
            log.warning("ended tmux session %s of %s: %s", name, owner, LEFT_BEHIND)
            ended.append(owner)
        return ended

    def _exited(
        self, record: SessionRecord, status: int | None, pane_left: bool, reason: str = ""
    ) -> None:
        tail: list[str] = []
        if pane_left:
            try:
                tail = last_lines(self.runner.capture(record.tmux_session, history=200))
            except TmuxError:
                tail = []
        self.registry.update(
            record.work_item_id, state=SessionState.EXITED.value, exit_status=status
        )
        # Its pass dies; what its limits counted (a memory kill, refused forks) joins the event.
        said = self.ended(record.work_item_id) if self.ended is not None else None
        limits = said if isinstance(said, Mapping) else {}
        self.emit(
            "session.exited",
            record.work_item_id,
            session_id=record.session_id,
            tmux_target=record.tmux_target,
            exit_status=status,
            last_lines=tail,
            reason=reason or ("process exited" if pane_left else "tmux session is gone"),
            **limits,
            **(self.describe(record) if self.describe is not None else {}),
        )

    def _look(self, record: SessionRecord, text: str) -> None:
        reader = screens_of(record.harness)
        screen = reader.classify(text)
        if screen is not None:
            report_stall(self.registry, self.emit, record, screen, text)
            return
        if record.pending and reader.input_ready(text):
            paste_first_message(
                self.runner, self.registry, self.emit, record, record.pending, late=True, shown=text
            )
        elif record.unsent:
            follow_through(self.runner, self.registry, self.emit, record, text)
        if record.state == SessionState.STALLED:
            self.registry.update(
                record.work_item_id,
                state=SessionState.RUNNING.value,
                stall="",
                stall_fingerprint="",
            )
            self.emit(
                "session.unstalled",
                record.work_item_id,
                was=record.stall,
                session_id=record.session_id,
                tmux_target=record.tmux_target,
            )
