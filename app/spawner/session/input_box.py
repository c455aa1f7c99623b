"""Putting a message into a session's input box, and knowing that it was sent.

A paste into Claude Code is sent by the Enter after it — unless the TUI was still busy
(starting up, or taking in a long paste) when that Enter arrived: then the text stays in the
box, or, while it is still starting, the paste can be lost. `submit` presses Enter once the
box shows the text, watches the pane for SUBMIT_WINDOW and presses Enter again for text it
sees held. What it could not confirm in
that window is kept on the session's record (`unsent`) and `follow_through`, run by the
watchdog on every look, finishes the job: another Enter for text still held, the first
message pasted again into a session that shows none yet, `session.paste_confirmed` when it
shows in the transcript, and `session.paste_unconfirmed` (a warning) when it never does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from app.config import DEFAULT_HARNESS
from app.spawner.harness import adapter_of
from app.spawner.registry import Registry, SessionRecord
from app.spawner.session.tmux import TmuxError, TmuxRunner

Emit = Callable[..., Any]  # SpawnerEvents.emit, or a test's recorder

SUBMIT_WINDOW = 10.0  # seconds a paste is watched until it shows as sent
SUBMIT_POLL = 0.25  # seconds between looks once the Enter went
# Until the Enter goes, looks come quickly: the first this long after the paste, each next
# one LOOK_GROWTH times as long after the last, up to SHOW_POLL. The Enter follows the box
# showing the text, which an idle session does within a few hundredths of a second and one
# that has just drawn its box within a few tenths.
FIRST_LOOK = 0.01
LOOK_GROWTH = 1.5
SHOW_POLL = 0.03
SHOW_WINDOW = 5.0  # seconds a paste may take to show in the box before its Enter goes anyway
SUBMIT_RETRIES = 8  # Enters pressed again at most, in the window
# Looks in a row the box must hold the text before another Enter: long enough that a paste
# claude is still taking in (60,000 characters take seconds) is not sent twice.
HELD_LOOKS = 12
FOLLOW_PRESSES = 20  # Enters the watchdog presses, at most, for text still held
FOLLOW_REPASTES = 2  # times a first message no session shows is pasted again
HISTORY_LINES = 2000  # scrollback read before a first message is pasted again (tmux's default)
FOLLOW_SECONDS = 120.0  # after this, a paste never seen sent is reported, not watched


class PasteOutcome(StrEnum):
    ECHOED = "echoed"  # one more transcript line like it than before: sent (or queued)
    TAKEN = "taken"  # the box was seen holding it, then empty
    NO_BOX = "no_box"  # no input box shows (a dialog, or not Claude Code): nothing to watch
    HELD = "held"  # still in the box when the window ran out
    UNSEEN = "unseen"  # neither in the box nor in the transcript: maybe lost


CONFIRMED = frozenset({PasteOutcome.ECHOED, PasteOutcome.TAKEN, PasteOutcome.NO_BOX})


@dataclass(frozen=True)
class Sent:
    removed: int  # control characters the paste removed
    outcome: PasteOutcome
    before: int  # transcript lines like the text before the paste

    @property
    def confirmed(self) -> bool:
        return self.outcome in CONFIRMED


def submit(
    runner: TmuxRunner,
    name: str,
    owner: str,
    text: str,
    harness: str = DEFAULT_HARNESS,
    *,
    shown: str | None = None,
) -> Sent:
    """Paste `text` into tmux session `name` (work item `owner`'s, running `harness`, whose
    adapter says how its pane reads and how long a paste settles) and watch it go. `shown`
    is what the pane showed just now, when the caller has looked (one look fewer here).

    The Enter waits until the box shows the text (at most SHOW_WINDOW): a pasted message long
    enough to scroll its own first line off the pane is then still known as sent, because the
    box was seen holding it and then empty. Text seen held on HELD_LOOKS looks in a row after
    the Enter (and not yet in the transcript) gets another; an Enter on an empty box does
    nothing. A pane with no input box gets its Enter at once."""
    adapter = adapter_of(harness)
    reader = adapter.screens
    echoes, unsent, input_line = reader.echoes, reader.unsent, reader.input_line
    try:
        before = echoes(runner.capture(name) if shown is None else shown, text)
    except TmuxError:
        before = 0
    removed = runner.paste(name, text, owner=owner)
    start = time.monotonic()
    entered, seen_held, held_looks, pressed = False, False, 0, 0
    outcome = PasteOutcome.UNSEEN
    pause = FIRST_LOOK
    while time.monotonic() - start < SUBMIT_WINDOW:
        time.sleep(max(SUBMIT_POLL if entered else pause, adapter.enter_after))
        pause = min(pause * LOOK_GROWTH, SHOW_POLL)
        try:
            screen = runner.capture(name)
        except TmuxError:
            outcome = PasteOutcome.NO_BOX
            break
        # Only the Enter sends the paste, so only a message like it that shows after the Enter
        # is it, counted from the screen just before the Enter: a resumed Codex draws its
        # history after its box, and a message with the same first line taken from the
        # harness's queue may reach the transcript while this paste waits in the box.
        if entered and echoes(screen, text) > before:
            outcome = PasteOutcome.ECHOED
            break
        held, box = unsent(screen, text), input_line(screen)
        if not entered:
            waited = time.monotonic() - start >= SHOW_WINDOW
            if held or box is None or not adapter.enter_when_shown or waited:
                before = echoes(screen, text)
                runner.press(name, ["Enter"], owner=owner)
                entered, seen_held = True, held
            if box is None:
                outcome = PasteOutcome.NO_BOX
                break
            continue
        if held:
            seen_held, held_looks, outcome = True, held_looks + 1, PasteOutcome.HELD
            if held_looks >= HELD_LOOKS and pressed < SUBMIT_RETRIES:
                runner.press(name, ["Enter"], owner=owner)
                pressed, held_looks = pressed + 1, 0
            continue
        held_looks = 0
        if box is None:
            outcome = PasteOutcome.NO_BOX
            break
        if seen_held:
            outcome = PasteOutcome.TAKEN
            break
    return Sent(removed, outcome, before)


def watch_unsent(
    registry: Registry, emit: Emit, record: SessionRecord, text: str, sent: Sent, *, first: bool
) -> None:
    """Hand a paste `submit` could not confirm to the watchdog, and say so."""
    if sent.confirmed:
        return
    registry.update(
        record.work_item_id,
        unsent=text,
        unsent_before=sent.before,
        unsent_first=first,
        unsent_tries=0,
        unsent_since=datetime.now(UTC).isoformat(),
    )
    emit(
        "session.paste_pending",
        record.work_item_id,
        level="warning",
        session_id=record.session_id,
        outcome=sent.outcome.value,
        chars=len(text),
    )


def paste_first_message(
    runner: TmuxRunner,
    registry: Registry,
    emit: Emit,
    record: SessionRecord,
    text: str,
    *,
    late: bool,
    shown: str | None = None,
) -> None:
    """Paste a session's first message and forget it as pending; `session.prompted` says
    so (`late` when it waited for the watchdog; `shown`: the pane as just seen, if it was)."""
    name, harness = record.tmux_session, record.harness
    sent = submit(runner, name, record.work_item_id, text, harness, shown=shown)
    registry.update(record.work_item_id, pending="")
    note = {"removed_controls": sent.removed} if sent.removed else {}
    emit(
        "session.prompted",
        record.work_item_id,
        session_id=record.session_id,
        chars=len(text),
        late=late,
        **note,
    )
    watch_unsent(registry, emit, record, text, sent, first=True)


def _forget(registry: Registry, record: SessionRecord) -> None:
    registry.update(
        record.work_item_id, unsent="", unsent_before=0, unsent_tries=0, unsent_since=""
    )


def _confirmed(registry: Registry, emit: Emit, record: SessionRecord, **note: Any) -> None:
    _forget(registry, record)
    emit("session.paste_confirmed", record.work_item_id, session_id=record.session_id, **note)


def _never_sent(runner: TmuxRunner, record: SessionRecord) -> bool:
    """Whether the session's pane, scrollback included, shows no message at all. The
    scrollback counts: a first message longer than the pane pushes its own first line off it,
    and must not be taken for lost and pasted again."""
    try:
        whole = runner.capture(record.tmux_session, history=HISTORY_LINES)
    except TmuxError:
        return False
    return adapter_of(record.harness).screens.transcript_messages(whole) == 0


def follow_through(
    runner: TmuxRunner, registry: Registry, emit: Emit, record: SessionRecord, screen: str
) -> None:
    """One look at a session holding an unconfirmed paste (`record.unsent`), `screen` being
    what its pane shows now."""
    text = record.unsent
    reader = adapter_of(record.harness).screens
    if reader.echoes(screen, text) > record.unsent_before:
        _confirmed(registry, emit, record)
        return
    if reader.unsent(screen, text) and record.unsent_tries < FOLLOW_PRESSES:
        runner.press(record.tmux_session, ["Enter"], owner=record.work_item_id)
        registry.update(record.work_item_id, unsent_tries=record.unsent_tries + 1)
        return
    box = reader.input_line(screen)
    if (
        record.unsent_first
        and box == ""
        and record.unsent_tries < FOLLOW_REPASTES
        and _never_sent(runner, record)
    ):
        # Nothing was ever sent to this session and its box is empty: the paste was lost.
        registry.update(record.work_item_id, unsent_tries=record.unsent_tries + 1)
        sent = submit(runner, record.tmux_session, record.work_item_id, text, record.harness)
        if sent.confirmed:
            _confirmed(registry, emit, record, pasted_again=True)
        return
    waited = datetime.now(UTC) - datetime.fromisoformat(record.unsent_since)
    if waited.total_seconds() >= FOLLOW_SECONDS:
        _forget(registry, record)
        emit(
            "session.paste_unconfirmed",
            record.work_item_id,
            level="warning",
            session_id=record.session_id,
            box=box,
            chars=len(text),
        )
