"""Reading the questions the real `claude` binary shows, and the keys that answer them:
screens captured from the binary (tests/data/claude-screens)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.spawner.harness.claude_screens import classify_screen
from app.spawner.harness.screens import Screen
from app.spawner.session.dialogs import AnswerRefused, Dialog, keystrokes, parse_dialog
from tests.support import FIXTURES

CAPTURED = Path(__file__).parents[1] / "data" / "claude-screens"
SHARED = FIXTURES / "claude-screens"


def dialog(path: Path) -> Dialog:
    found = parse_dialog(path.read_text())
    assert found is not None, path.name
    return found


def test_the_write_permission_prompt_offers_yes_and_no() -> None:
    found = dialog(CAPTURED / "permission-write.txt")
    assert found.question == "Do you want to create hello.txt?"
    assert found.options[0] == "Yes" and found.options[-1] == "No" and len(found.options) == 3
    assert found.cursor == 0
    assert classify_screen((CAPTURED / "permission-write.txt").read_text()) == (
        Screen.PERMISSION_PROMPT
    )


def test_the_bash_permission_prompt_is_a_permission_prompt_with_four_options() -> None:
    found = dialog(CAPTURED / "permission-bash.txt")
    assert found.question == "Do you want to proceed?" and len(found.options) == 4
    assert classify_screen((CAPTURED / "permission-bash.txt").read_text()) == (
        Screen.PERMISSION_PROMPT
    )


def test_a_question_menu_lists_its_options_without_their_descriptions() -> None:
    found = dialog(CAPTURED / "question-menu.txt")
    assert found.question == "Which database should the tests use?"
    assert found.options == ("SQLite", "PostgreSQL", "Type something.", "Chat about this")


@pytest.mark.parametrize(
    ("path", "question", "options", "cursor"),
    [
        (
            CAPTURED / "trust-dialog.txt",
            "Quick safety check: Is this a project you created or one you trust?",
            ("No, exit", "Yes, I trust this folder"),
            0,
        ),
        (
            SHARED / "02-trust-dialog.txt",
            "Quick safety check: Is this a project you created or one you trust?",
            ("No, exit", "Yes, I trust this folder"),
            0,
        ),
        (
            SHARED / "03-api-key-prompt.txt",
            "Do you want to use this API key?",
            ("Yes", "No (recommended)"),
            1,
        ),
        (SHARED / "07-bypass-disclaimer.txt", "", ("No, exit", "Yes, I accept"), 0),
    ],
)
def test_unnumbered_dialogs_are_read_with_the_cursor_where_it_is(
    path: Path, question: str, options: tuple[str, ...], cursor: int
) -> None:
    assert dialog(path) == Dialog(question=question, options=options, cursor=cursor)


@pytest.mark.parametrize(
    "name",
    [
        "01-first-run-no-network.txt",
        "05-session-api-unreachable.txt",
        "06-followup-pasted.txt",
        "08-session-bypass-mode.txt",
    ],
)
def test_a_screen_without_a_question_has_no_dialog(name: str) -> None:
    assert parse_dialog((SHARED / name).read_text()) is None


def test_an_answer_moves_the_cursor_with_arrow_keys_then_presses_enter() -> None:
    write = dialog(CAPTURED / "permission-write.txt")
    assert keystrokes(write, 1) == ["Enter"]
    assert keystrokes(write, 3) == ["Down", "Down", "Enter"]
    api_key = dialog(SHARED / "03-api-key-prompt.txt")  # the cursor starts on option 2
    assert keystrokes(api_key, 1) == ["Up", "Enter"]


def test_an_option_out_of_range_or_needing_typed_text_is_refused() -> None:
    menu = dialog(CAPTURED / "question-menu.txt")
    with pytest.raises(AnswerRefused, match="no option 9; the screen offers 1 to 4"):
        keystrokes(menu, 9)
    with pytest.raises(AnswerRefused, match="needs typed text"):
        keystrokes(menu, 3)
    with pytest.raises(AnswerRefused):
        keystrokes(menu, 0)


def test_the_fingerprint_tells_two_questions_apart() -> None:
    write, bash = (
        dialog(CAPTURED / "permission-write.txt"),
        dialog(CAPTURED / "permission-bash.txt"),
    )
    assert write.fingerprint != bash.fingerprint
    assert write.fingerprint == dialog(CAPTURED / "permission-write.txt").fingerprint
