"""A paste the session did not take at once is not forgotten: real tmux panes running a TUI
that, like Claude Code under load, loses a paste while it starts or keeps pasted text in its
box past the Enter. The watchdog finishes what `submit` could not confirm."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.spawner.registry import SessionRecord
from app.spawner.session.input_box import FOLLOW_SECONDS, PasteOutcome, paste_first_message, submit
from tests.spawner_support import Fleet
from tests.support import wait_for

# A TUI in the shape of Claude Code's: an input box between two rules, a pasted message shown
# in the box (its first line) until an Enter sends it into the transcript above. `drop`
# loses the first paste; `hold:N` ignores the first N Enters after a paste; `tall` shows a
# sent message whole in the transcript, as Claude Code does, so a long one pushes its own
# first line off the pane; `queued` draws, as each paste arrives, an earlier message with the
# same first line moving from its queue into the transcript (claude does so when it takes up
# a message queued while it was busy). Every message it takes is appended to the file in its
# second argument, so a test counts what was really sent.
SLOW_TUI = r"""
import os, sys, tty
tty.setraw(0)
mode = sys.argv[1]
drop = mode == "drop"
deaf = int(mode.split(":")[1]) if mode.startswith("hold:") else 0
tall = mode == "tall"
queued = mode == "queued"
sent_log = sys.argv[2]
rule = "\u2500" * 40
transcript, held, whole = [], "", ""
def draw():
    lines = ["slow tui", ""]
    for text in transcript:
        first, *rest = text.splitlines()
        lines += ["\u276f " + first] + (["  " + ln for ln in rest] if tall else [])
    lines += ["", rule, "\u276f " + held, rule]
    sys.stdout.write("\x1b[2J\x1b[H" + "\r\n".join(lines) + "\r\n")
    sys.stdout.flush()
sys.stdout.write("\x1b[?2004h")
draw()
buf = b""
while True:
    data = os.read(0, 65536)
    if not data:
        break
    buf += data
    while buf:
        if buf.startswith(b"\x1b[200~"):
            end = buf.find(b"\x1b[201~")
            if end < 0:
                break
            text, buf = buf[6:end].decode(), buf[end + 6 :]
            if drop:
                drop = False
                continue
            whole = text.strip("\n")
            held = next((ln for ln in text.splitlines() if ln.strip()), "")
            if queued:
                transcript.append(whole)
            draw()
        elif buf.startswith(b"\r"):
            buf = buf[1:]
            if held and deaf > 0:
                deaf -= 1
            elif held:
                transcript.append(whole)
                with open(sent_log, "a") as log:
                    log.write(whole + "\n\0")
                held = ""
                draw()
        else:
            buf = buf[1:]
"""


def slow_tui(fleet: Fleet, name: str, mode: str) -> SessionRecord:
    script = fleet.tmp / "slow_tui.py"
    script.write_text(SLOW_TUI)
    record = fleet.start(name, f"{sys.executable} {script} {mode} {fleet.tmp / f'sent-{name}'}")
    wait_for(lambda: "slow tui" in fleet.runner.capture(name))
    return record


def taken(fleet: Fleet, name: str) -> list[str]:
    """Every message the TUI in session `name` took, whole, in order."""
    log = fleet.tmp / f"sent-{name}"
    return log.read_text().split("\n\0")[:-1] if log.exists() else []


def messages(fleet: Fleet, name: str) -> list[str]:
    screen = fleet.runner.capture(name)
    return [ln[2:] for ln in screen.splitlines()[:-4] if ln.startswith("\u276f ")]


def typed(fleet: Fleet, name: str, text: str) -> None:
    """Paste `text` into pane `name` and press Enter at once, as a hurried human would."""
    fleet.runner.paste(name, text, owner=f"github:o/r#{name}")
    fleet.runner.press(name, ["Enter"], owner=f"github:o/r#{name}")


def test_a_paste_held_past_its_enter_gets_another_enter(fleet: Fleet) -> None:
    slow_tui(fleet, "1", "hold:1")
    sent = submit(fleet.runner, "1", "github:o/r#1", "Work on item 1 now.")
    assert sent.outcome is PasteOutcome.ECHOED and sent.confirmed
    assert messages(fleet, "1") == ["Work on item 1 now."]


def test_a_first_message_the_session_lost_is_pasted_again_by_the_watchdog(
    fleet: Fleet,
) -> None:
    record = slow_tui(fleet, "2", "drop")
    paste_first_message(fleet.runner, fleet.registry, fleet.events.emit, record, "Go.", late=False)
    (pending,) = fleet.events_named("session.paste_pending")
    assert pending["outcome"] == "unseen" and messages(fleet, "2") == []
    fleet.dog.tick()
    assert messages(fleet, "2") == ["Go."]
    (confirmed,) = fleet.events_named("session.paste_confirmed")
    assert confirmed["pasted_again"] is True
    after = fleet.registry.get("github:o/r#2")
    assert after is not None and after.unsent == ""
    fleet.dog.tick()
    assert messages(fleet, "2") == ["Go."]  # confirmed: never pasted a third time


def test_text_still_held_after_the_window_is_sent_by_the_watchdog(fleet: Fleet) -> None:
    slow_tui(fleet, "3", "hold:1")
    typed(fleet, "3", "please also fix the docs")
    wait_for(lambda: "\u276f please also fix the docs" in fleet.runner.capture("3"))
    unsent_since = datetime.now(UTC).isoformat()
    fleet.registry.update(
        "github:o/r#3", unsent="please also fix the docs", unsent_since=unsent_since
    )
    fleet.dog.tick()
    wait_for(lambda: messages(fleet, "3") == ["please also fix the docs"])
    fleet.dog.tick()
    assert [e["event"] for e in fleet.events_named("session.paste_confirmed")] == [
        "session.paste_confirmed"
    ]


def test_a_paste_never_seen_sent_is_reported_once_it_is_given_up(
    fleet: Fleet, tmp_path: Path
) -> None:
    slow_tui(fleet, "4", "hold:0")
    typed(fleet, "4", "first")  # the transcript is not empty
    wait_for(lambda: messages(fleet, "4") == ["first"])
    long_ago = datetime.now(UTC) - timedelta(seconds=FOLLOW_SECONDS + 1)
    fleet.registry.update(
        "github:o/r#4", unsent="second", unsent_first=True, unsent_since=long_ago.isoformat()
    )
    fleet.dog.tick()
    (given_up,) = fleet.events_named("session.paste_unconfirmed")
    assert given_up["level"] == "warning" and given_up["chars"] == len("second")
    assert messages(fleet, "4") == ["first"]  # a session with a transcript is never re-pasted
    after = fleet.registry.get("github:o/r#4")
    assert after is not None and after.unsent == ""


def test_a_like_message_leaving_the_queue_before_the_enter_does_not_pass_for_this_one(
    fleet: Fleet,
) -> None:
    slow_tui(fleet, "7", "queued")
    text = "Follow-up from @octocat on GitHub:\n\nplease also fix the docs"
    sent = submit(fleet.runner, "7", "github:o/r#7", text)
    assert sent.confirmed
    assert taken(fleet, "7") == [text]  # its own Enter went: the TUI took it


LONG = "Work on the long issue.\n" + "".join(f"line {n} of the issue body\n" for n in range(80))


def test_a_message_that_pushes_its_own_first_line_off_the_pane_is_known_as_sent(
    fleet: Fleet,
) -> None:
    record = slow_tui(fleet, "5", "tall")
    paste_first_message(fleet.runner, fleet.registry, fleet.events.emit, record, LONG, late=False)
    assert taken(fleet, "5") == [LONG.strip("\n")]
    assert "\u276f Work on the long issue." not in fleet.runner.capture("5")  # scrolled off
    assert fleet.events_named("session.paste_pending") == []
    fleet.dog.tick()
    assert taken(fleet, "5") == [LONG.strip("\n")]


def test_a_first_message_only_the_scrollback_shows_is_never_pasted_again(fleet: Fleet) -> None:
    slow_tui(fleet, "6", "tall")
    typed(fleet, "6", LONG)
    wait_for(lambda: len(taken(fleet, "6")) == 1)
    fleet.registry.update(
        "github:o/r#6",
        unsent=LONG,
        unsent_first=True,
        unsent_since=datetime.now(UTC).isoformat(),
    )
    fleet.dog.tick()
    fleet.dog.tick()
    assert taken(fleet, "6") == [LONG.strip("\n")]
    assert fleet.events_named("session.paste_confirmed") == []
