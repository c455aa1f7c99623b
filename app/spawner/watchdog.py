"""Seeing what a session is doing without a human attached.

`classify_screen` (pure) recognises the screens on which Claude Code waits for a keypress
forever: the workspace trust dialog, the custom API key prompt, the bypass-permissions
disclaimer, a question menu, a permission prompt, and the first-run screen that cannot reach
Anthropic. `Watchdog.tick` looks at every live session once: a dead pane becomes
`session.exited`, a blocking screen `session.stalled` (naming which), and a stalled pane that
moved on `session.unstalled` — so nothing waiting on a keypress is reported as running.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from app.spawner.locks import ItemLocks
from app.spawner.registry import Registry, SessionRecord, SessionState
from app.spawner.tmux import TmuxError, TmuxRunner


class Screen(StrEnum):
    TRUST_DIALOG = "trust-dialog"
    API_KEY_PROMPT = "api-key-prompt"
    BYPASS_DISCLAIMER = "bypass-disclaimer"
    QUESTION_MENU = "question-menu"
    PERMISSION_PROMPT = "permission-prompt"
    UNABLE_TO_CONNECT = "unable-to-connect"


# Every phrase of a signature must be on screen (whitespace-insensitive).
SIGNATURES: tuple[tuple[Screen, tuple[str, ...]], ...] = (
    (Screen.TRUST_DIALOG, ("Is this a project you created or one you trust", "trust this folder")),
    (Screen.API_KEY_PROMPT, ("Detected a custom API key", "Do you want to use this API key?")),
    (Screen.BYPASS_DISCLAIMER, ("running in Bypass Permissions mode", "Yes, I accept")),
    (Screen.QUESTION_MENU, ("Enter to select", "to navigate", "Esc to cancel")),
    (Screen.PERMISSION_PROMPT, ("Do you want to", "don't ask again")),
    (Screen.UNABLE_TO_CONNECT, ("Unable to connect to Anthropic services",)),
)

HINTS: dict[Screen, str] = {
    Screen.TRUST_DIALOG: "the workspace is not trusted; see workspace.trust_failed for why",
    Screen.API_KEY_PROMPT: "Claude Code asks whether to use ANTHROPIC_API_KEY; approve it once "
    "interactively or log in with `claude /login` on the devbox",
    Screen.BYPASS_DISCLAIMER: "the bypass-permissions disclaimer is not accepted; set "
    "routing.harnessTrust.acceptBypassPermissions: auto",
    Screen.QUESTION_MENU: "the session opened a question menu; answer it in tmux",
    Screen.PERMISSION_PROMPT: "the session asks for a permission; answer it in tmux or declare "
    "the permission flags under harnesses[].args",
    Screen.UNABLE_TO_CONNECT: "Claude Code cannot reach Anthropic from the devbox",
}

_SPACE = re.compile(r"\s+")
DEAD_PANE_LINE = "Pane is dead"


def _flat(text: str) -> str:
    return _SPACE.sub(" ", text)


def classify_screen(text: str) -> Screen | None:
    """The blocking screen `text` shows, or None for a session that is working or idle."""
    flat = _flat(text)
    for screen, phrases in SIGNATURES:
        if all(_flat(p) in flat for p in phrases):
            return screen
    return None


def last_lines(text: str, count: int = 6, limit: int = 600) -> list[str]:
    """The last non-empty lines of a pane, without tmux's own "Pane is dead" line."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(DEAD_PANE_LINE)]
    tail = lines[-count:]
    while sum(len(ln) for ln in tail) > limit and len(tail) > 1:
        tail = tail[1:]
    return [ln[:limit] for ln in tail]


Emit = Callable[..., Any]


class Watchdog:
    """One look at every live session per `tick`; state changes become events."""

    def __init__(
        self, runner: TmuxRunner, registry: Registry, emit: Emit, locks: ItemLocks | None = None
    ) -> None:
        self.runner = runner
        self.registry = registry
        self.emit = emit
        self.locks = locks or ItemLocks()

    def tick(self) -> None:
        live = [r for r in self.registry.all() if r.live]
        if not live:
            return
        every = self.runner.panes()
        # A pane counts as a record's only when it is tagged with the record's work item.
        panes = {
            r.work_item: p
            for r in live
            if (p := every.get(r.tmux_session)) is not None and p.owner == r.work_item
        }
        running = [pane.session for pane in panes.values() if not pane.dead]
        screens = self.runner.capture_many(running)
        for seen in live:
            with self.locks.try_hold(seen.work_item) as held:
                record = self.registry.get(seen.work_item) if held else None
                if record is None or not record.live or record.started_at != seen.started_at:
                    continue  # a job is acting on it, or it was relaunched since the look
                pane = panes.get(record.work_item)
                if pane is None or pane.dead:
                    self._exited(record, pane.status if pane else None, pane is not None)
                else:
                    self._look(record, screens.get(record.tmux_session, ""))

    def _exited(self, record: SessionRecord, status: int | None, pane_left: bool) -> None:
        tail: list[str] = []
        if pane_left:
            try:
                tail = last_lines(self.runner.capture(record.tmux_session, history=200))
            except TmuxError:
                tail = []
        self.registry.update(record.work_item, state=SessionState.EXITED.value, exit_status=status)
        self.emit(
            "session.exited",
            record.work_item,
            session_id=record.session_id,
            tmux_target=record.tmux_target,
            exit_status=status,
            last_lines=tail,
            reason="process exited" if pane_left else "tmux session is gone",
        )

    def _look(self, record: SessionRecord, text: str) -> None:
        screen = classify_screen(text)
        if screen is not None and (record.state != SessionState.STALLED or record.stall != screen):
            self.registry.update(record.work_item, state=SessionState.STALLED.value, stall=screen)
            self.emit(
                "session.stalled",
                record.work_item,
                screen=screen.value,
                hint=HINTS[screen],
                session_id=record.session_id,
                tmux_target=record.tmux_target,
            )
        elif screen is None and record.state == SessionState.STALLED:
            self.registry.update(record.work_item, state=SessionState.RUNNING.value, stall="")
            self.emit(
                "session.unstalled",
                record.work_item,
                was=record.stall,
                session_id=record.session_id,
                tmux_target=record.tmux_target,
            )
