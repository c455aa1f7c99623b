"""The pure rules of answering a session's question: the number and pinned question an answer
names, the Slack buttons and their values, what a stall report records."""

from __future__ import annotations

from app.fleet.results import answer_note
from app.workitems.decide.answer import answer_text, chosen_number, pinned_question
from app.workitems.flow.session_facts import session_facts
from channels.answer_blocks import answer_buttons, parse_answer_value
from channels.blocks import session

KEYWORD = "the-loop answer"
STALLED = {
    "event": "session.stalled",
    "screen": "permission-prompt",
    "question": "Do you want to create hello.txt?",
    "options": ["Yes", "Yes, and switch to accept edits", "No"],
    "fingerprint": "0123456789abcdef",
}


def test_the_option_number_follows_the_keyword() -> None:
    assert chosen_number("the-loop answer 2", KEYWORD) == 2
    assert chosen_number("  The-Loop Answer 3 please", KEYWORD) == 3
    assert chosen_number("the-loop answer", KEYWORD) is None
    assert chosen_number("the-loop answered 2", KEYWORD) is None
    assert chosen_number("the-loop answer two", KEYWORD) is None


def test_a_button_answer_names_its_question_and_a_typed_one_need_not() -> None:
    text = answer_text(KEYWORD, 1, "0123456789abcdef")
    assert text == "the-loop answer 1 (question 01234567)"
    assert chosen_number(text, KEYWORD) == 1 and pinned_question(text) == "01234567"
    assert pinned_question("the-loop answer 1") == ""


def test_one_button_per_option_carrying_item_number_and_question() -> None:
    (block,) = answer_buttons("github:o/r#1", STALLED)
    labels = [e["text"]["text"] for e in block["elements"]]
    assert labels == ["1. Yes", "2. Yes, and switch to accept edits", "3. No"]
    values = [parse_answer_value(e["value"]) for e in block["elements"]]
    assert values[2] == ("github:o/r#1", 3, "0123456789abcdef")
    assert answer_buttons("github:o/r#1", {**STALLED, "options": []}) == []
    assert parse_answer_value("github:o/r#1") is None


def test_the_stalled_message_asks_the_question_and_offers_the_buttons() -> None:
    message = session(STALLED, "https://github.com/o/r/issues/1", "github:o/r#1")
    assert "Do you want to create hello.txt?" in message.text
    kinds = [b["type"] for b in message.blocks]
    assert kinds[:2] == ["section", "actions"]


def test_a_new_question_at_the_same_screen_is_a_new_stall_episode() -> None:
    first = session_facts("session.stalled", STALLED, {})
    again = session_facts("session.stalled", STALLED, first)
    other = session_facts("session.stalled", {**STALLED, "fingerprint": "fedcba9876543210"}, first)
    assert first["stalls"] == again["stalls"] == 1 and other["stalls"] == 2
    assert first["stall_fingerprint"] == "0123456789abcdef" and first["stall_options"][0] == "Yes"
    moved = session_facts("session.unstalled", {}, other)
    assert "stall_fingerprint" not in moved and "stall_options" not in moved


def test_an_answer_that_did_not_take_is_said_to_whoever_gave_it() -> None:
    assert answer_note("octocat", 1, "Yes", "the session shows no question now") == (
        "@octocat, your answer 1 (Yes) did not take: the session shows no question now."
    )
