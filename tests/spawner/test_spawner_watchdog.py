"""The watchdog against the real Claude Code screens (tests/data/claude-screens) and
real tmux panes: a blocking screen is `stalled`, a dead pane `exited`, never `running`."""

from __future__ import annotations

import pytest

from app.config.operator_config import parse_config
from app.gateway.passes import Passes
from app.protocol import AnswerJob
from app.spawner.appclient import ClaimedJob
from app.spawner.context import SpawnerContext
from app.spawner.harness.claude_screens import (
    classify_screen,
    echoes,
    input_line,
    input_ready,
    unsent,
)
from app.spawner.harness.screens import Screen, last_lines
from app.spawner.registry import SessionState
from app.spawner.session.dialogs import parse_dialog
from app.spawner.session.watchdog import LEFT_BEHIND, Watchdog
from app.spawner.steps.keypick import AnswerFailed, answer
from tests.spawner_support import Fleet
from tests.support import FIXTURES, wait_for

SCREENS = FIXTURES / "claude-screens"


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("01-first-run-no-network.txt", Screen.UNABLE_TO_CONNECT),
        ("02-trust-dialog.txt", Screen.TRUST_DIALOG),
        ("03-api-key-prompt.txt", Screen.API_KEY_PROMPT),
        ("04-root-refuses-bypass.txt", None),
        ("05-session-api-unreachable.txt", None),
        ("06-followup-pasted.txt", None),
        ("07-bypass-disclaimer.txt", Screen.BYPASS_DISCLAIMER),
        ("08-session-bypass-mode.txt", None),
    ],
)
def test_every_captured_screen_is_classified(fixture: str, expected: Screen | None) -> None:
    assert classify_screen((SCREENS / fixture).read_text()) == expected


@pytest.mark.parametrize(
    ("fixture", "ready"),
    [
        ("01-first-run-no-network.txt", False),
        ("02-trust-dialog.txt", False),  # a prompt-mark line, but no input box around it
        ("03-api-key-prompt.txt", False),
        ("04-root-refuses-bypass.txt", False),
        ("05-session-api-unreachable.txt", True),
        ("06-followup-pasted.txt", True),  # placeholder text in the box: still ready
        ("07-bypass-disclaimer.txt", False),
        ("08-session-bypass-mode.txt", True),
    ],
)
def test_the_input_box_is_recognised_on_every_captured_screen(fixture: str, ready: bool) -> None:
    assert input_ready((SCREENS / fixture).read_text()) is ready


def test_the_question_menu_from_spec_001_is_a_blocking_screen() -> None:
    menu = (
        "\u276f 1. Use a list (Recommended)\n  2. Use a set\n  3. Type something.\n"
        "  4. Chat about this\n\nEnter to select · ↑/↓ to navigate · Esc to cancel\n"
    )
    assert classify_screen(menu) == Screen.QUESTION_MENU


def test_a_conversation_that_quotes_a_phrase_is_not_a_screen() -> None:
    assert (
        classify_screen("\u276f hello\n⏺ Do you want to use this API key? I cannot tell.") is None
    )


def test_last_lines_drop_tmux_s_dead_pane_line() -> None:
    text = (SCREENS / "04-root-refuses-bypass.txt").read_text() + "\n\nPane is dead (status 1)\n"
    assert last_lines(text) == [
        "--dangerously-skip-permissions cannot be used with root/sudo privileges for security "
        "reasons"
    ]


def test_a_pane_at_the_trust_dialog_is_stalled_once_then_unstalled(fleet: Fleet) -> None:
    screen = SCREENS / "02-trust-dialog.txt"
    fleet.start("1", f"cat '{screen}'; sleep 1.5; clear; echo working; sleep 30")
    wait_for(lambda: "Quick safety check" in fleet.runner.capture("1"))
    fleet.dog.tick()
    fleet.dog.tick()
    (stalled,) = fleet.events_named("session.stalled")
    assert stalled["screen"] == "trust-dialog" and stalled["session_id"] == "sid-1"
    assert fleet.state("1") == SessionState.STALLED
    wait_for(lambda: "working" in fleet.runner.capture("1"))
    fleet.dog.tick()
    assert fleet.state("1") == SessionState.RUNNING
    assert fleet.events_named("session.unstalled")[0]["was"] == "trust-dialog"


def test_a_dead_pane_is_exited_with_its_status_and_last_words(fleet: Fleet) -> None:
    fleet.start(
        "2", "echo '--dangerously-skip-permissions cannot be used with root'; sleep 0.2; exit 1"
    )
    fleet.start("3", "echo alive; sleep 30")
    wait_for(lambda: (p := fleet.runner.pane("2")) and p.dead)
    fleet.dog.tick()
    fleet.dog.tick()
    (exited,) = fleet.events_named("session.exited")
    assert exited["work_item_id"] == "github:o/r#2" and exited["exit_status"] == 1
    assert exited["last_lines"] == ["--dangerously-skip-permissions cannot be used with root"]
    assert fleet.state("2") == SessionState.EXITED and fleet.state("3") == SessionState.RUNNING


def test_a_session_seen_ended_loses_its_model_pass(fleet: Fleet) -> None:
    passes = Passes()
    dog = Watchdog(fleet.runner, fleet.registry, fleet.events.emit, ended=passes.revoke)
    fleet.start("5", "sleep 0.2; exit 0")
    fleet.start("6", "sleep 30")
    ended, alive = passes.mint("github:o/r#5"), passes.mint("github:o/r#6")
    wait_for(lambda: (p := fleet.runner.pane("5")) and p.dead)
    dog.tick()
    assert passes.holder(ended) is None and passes.holder(alive) == "github:o/r#6"


def test_a_session_killed_outside_the_loop_is_exited(fleet: Fleet) -> None:
    fleet.start("4", "sleep 30")
    fleet.runner.kill("4", owner="github:o/r#4")
    fleet.dog.tick()
    (exited,) = fleet.events_named("session.exited")
    assert exited["reason"] == "tmux session is gone"


def test_a_session_relaunched_since_the_look_is_left_alone(fleet: Fleet) -> None:
    fleet.start("5", "exit 3")
    wait_for(lambda: (p := fleet.runner.pane("5")) and p.dead)
    with fleet.dog.locks.hold("github:o/r#5"):  # a job holds the item
        fleet.dog.tick()
    assert fleet.events_named("session.exited") == []


def box(content: str) -> str:
    rule = "─" * 40
    return f"● Working.\n\n{rule}\n\u276f {content}\n{rule}\n  ⏵⏵ bypass permissions on\n"


def test_what_the_input_box_holds_is_read_from_the_screen() -> None:
    assert input_line(box("[Pasted text #1 +22 lines]")) == "[Pasted text #1 +22 lines]"
    assert input_line(box("")) == ""
    assert input_line((SCREENS / "02-trust-dialog.txt").read_text()) is None


def test_a_paste_still_in_the_input_box_is_unsent_and_an_empty_box_is_sent() -> None:
    long = "Work on the GitHub issue\n" + "line\n" * 30
    assert unsent(box("[Pasted text #1 +31 lines]"), long)
    assert unsent(
        box("please also handle the empty-list case"), "please also handle the empty-list case"
    )
    assert not unsent(box(""), long)
    queued = (SCREENS / "06-followup-pasted.txt").read_text()  # queued behind a busy turn: sent
    assert not unsent(queued, "please also handle the empty-list case")


def test_a_short_multi_line_paste_still_in_the_box_is_unsent() -> None:
    """Claude Code shows a paste of a few lines whole in its box (as seen when an Enter came
    before it had taken the paste in): the box is still recognised, and holds the text."""
    held = box(
        "A follow-up from octocat on the issue:\n"
        "  please also check that the README names the new command,\n"
        "    and keep this indented line as it is."
    )
    multi = (
        "A follow-up from octocat on the issue:\n"
        "please also check that the README names the new command,\n"
        "  and keep this indented line as it is."
    )
    assert (input_line(held) or "").startswith("A follow-up from octocat on the issue:\n")
    assert unsent(held, multi)
    assert not unsent(box(""), multi)


def test_a_sent_message_shows_once_more_in_the_transcript() -> None:
    rule = "─" * 40
    before = box("")
    after = f"\u276f Work on item 3 now.\n● ok 3\n\n{rule}\n\u276f \n{rule}\n"
    assert echoes(before, "Work on item 3 now.") == 0 and echoes(after, "Work on item 3 now.") == 1
    assert (
        echoes(box("Work on item 3 now."), "Work on item 3 now.") == 0
    )  # the box is not the transcript


def answer_context(fleet: Fleet) -> SpawnerContext:
    return SpawnerContext(
        config=parse_config({}),
        runner=fleet.runner,
        registry=fleet.registry,
        events=fleet.events,
        home=fleet.tmp,
        state_dir=fleet.tmp,
        app_url="http://127.0.0.1:9",
        hosts=frozenset({"claude"}),
    )


def answer_job(name: str, choice: int, fingerprint: str) -> tuple[ClaimedJob, AnswerJob]:
    payload = AnswerJob(work_item_id=f"github:o/r#{name}", choice=choice, fingerprint=fingerprint)
    return ClaimedJob(id=1, payload=payload), payload


def test_an_answer_presses_keys_only_into_the_question_it_was_given_for(fleet: Fleet) -> None:
    screen = SCREENS / "02-trust-dialog.txt"
    # A pane that shows the dialog until a line is entered, then moves on.
    fleet.start("1", f"cat '{screen}'; read x; clear; echo moved on; sleep 30")
    wait_for(lambda: "Quick safety check" in fleet.runner.capture("1"))
    ctx = answer_context(fleet)
    shown = parse_dialog(fleet.runner.capture("1"))
    assert shown is not None
    with pytest.raises(AnswerFailed, match="another question"):
        answer(ctx, *answer_job("1", 2, "0" * 16))
    with pytest.raises(AnswerFailed, match="no option 3"):
        answer(ctx, *answer_job("1", 3, shown.fingerprint))
    assert "Quick safety check" in fleet.runner.capture("1")  # nothing was pressed
    result = answer(ctx, *answer_job("1", 2, shown.fingerprint))
    assert result["moved"] is True and result["option"] == "Yes, I trust this folder"
    assert "moved on" in fleet.runner.capture("1")
    (event,) = fleet.events_named("session.answered")
    assert event["choice"] == 2 and event["moved"] is True


def test_an_answer_to_a_screen_without_a_question_presses_nothing(fleet: Fleet) -> None:
    fleet.start("2", "echo working; sleep 30")
    wait_for(lambda: "working" in fleet.runner.capture("2"))
    with pytest.raises(AnswerFailed, match="no question"):
        answer(answer_context(fleet), *answer_job("2", 1, "0" * 16))


def test_a_starting_spawner_ends_the_work_sessions_an_earlier_run_left_and_reports_each(
    fleet: Fleet,
) -> None:
    """A recorded session and one never recorded (tagged, its record not written before the
    crash) are ended and reported; a standing session and a pane already dead are not."""
    fleet.start("1", "echo on the left-behind screen; sleep 60")
    fleet.start("2", "exit 3")  # ended on its own: `tick` reports its real exit status
    fleet.runner.start("unrecorded", fleet.tmp, ["sleep", "60"], owner="github:o/r#9")
    fleet.runner.start("ops", fleet.tmp, ["sleep", "60"], owner="standing:ops")
    wait_for(lambda: "left-behind" in fleet.runner.capture("1"))
    wait_for(lambda: (p := fleet.runner.pane("2")) is not None and p.dead)

    ended = fleet.dog.end_left_behind(lambda owner: owner.startswith("standing:"))

    assert sorted(ended) == ["github:o/r#1", "github:o/r#9"]
    assert not fleet.runner.exists("1") and not fleet.runner.exists("unrecorded")
    assert fleet.runner.exists("ops")  # the operator's own
    exits = {e["work_item_id"]: e for e in fleet.events_named("session.exited")}
    assert set(exits) == {"github:o/r#1", "github:o/r#9"}
    assert {e["reason"] for e in exits.values()} == {LEFT_BEHIND}
    assert "on the left-behind screen" in "\n".join(exits["github:o/r#1"]["last_lines"])
    assert fleet.state("1") == SessionState.EXITED
    fleet.dog.tick()  # the dead pane is the watchdog's as always
    assert fleet.events_named("session.exited")[-1]["exit_status"] == 3
