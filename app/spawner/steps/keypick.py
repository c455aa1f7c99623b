"""The answer job: pick one option of the question a stalled session's screen shows.

A human chose option `choice` of the question the App was told about. The spawner looks at
the pane again and sends keys only when it still shows that very question (same
fingerprint): a screen that moved on, or shows another question, gets nothing. The keys are
tmux key names (arrows, Enter), never text, so an answer cannot become input to the agent.
It then watches the pane until the question is gone (`moved`) or ANSWER_WAIT passes, and
says which in `session.answered`; the watchdog reports the session running again.
"""

from __future__ import annotations

import time
from typing import Any

from app.protocol import AnswerJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.session.dialogs import AnswerRefused, keystrokes, parse_dialog
from app.spawner.spawner_errors import SpawnerError

ANSWER_WAIT = 5.0  # seconds the pane has to move past the question
LOOK_EVERY = 0.05


class AnswerFailed(SpawnerError, RuntimeError):
    """Nothing was pressed; the message says why in one line."""


def answer(ctx: SpawnerContext, job: ClaimedJob, payload: AnswerJob) -> dict[str, Any]:
    record = ctx.registry.get(job.work_item_id)
    if record is None or not record.live:
        raise AnswerFailed("the item has no live session here; nothing was pressed")
    name, owner = record.tmux_session, record.work_item_id
    dialog = parse_dialog(ctx.runner.capture(name))
    if dialog is None:
        raise AnswerFailed("the session shows no question now; nothing was pressed")
    if dialog.fingerprint != payload.fingerprint:
        raise AnswerFailed(
            "the session shows another question than the one answered; nothing was pressed"
        )
    try:
        keys = keystrokes(dialog, payload.choice)
    except AnswerRefused as exc:
        raise AnswerFailed(f"{exc}; nothing was pressed") from exc
    started = time.monotonic()
    ctx.runner.press(name, keys, owner=owner)
    moved = False
    while time.monotonic() - started < ANSWER_WAIT:
        now = parse_dialog(ctx.runner.capture(name))
        if now is None or now.fingerprint != dialog.fingerprint:
            moved = True
            break
        time.sleep(LOOK_EVERY)
    seconds = round(time.monotonic() - started, 3)
    option = dialog.options[payload.choice - 1]
    ctx.events.emit(
        "session.answered",
        job.work_item_id,
        session_id=record.session_id,
        choice=payload.choice,
        option=option,
        by=payload.author,
        source=payload.source,
        moved=moved,
        seconds=seconds,
    )
    return {"answered": True, "moved": moved, "option": option, "seconds": seconds}
