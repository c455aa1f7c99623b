"""Only text is pasted into a session: no control character survives to end the bracketed
paste early or to act as a keystroke."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from app.spawner.session.pastetext import paste_text

END_PASTE = "\x1b[201~"


def test_plain_text_tabs_and_newlines_pass_unchanged() -> None:
    text = "please handle:\n\t- the empty list\n\t- `$(id)`; rm -rf ~ 🙂 日本語"
    assert paste_text(text).text == text and paste_text(text).removed == 0


def test_the_end_of_paste_sequence_cannot_survive() -> None:
    cleaned = paste_text(f"harmless{END_PASTE}\r!rm -rf ~\r\x03\x1b[Z/exit\r")
    assert "\x1b" not in cleaned.text and "\x03" not in cleaned.text
    assert cleaned.text == "harmless[201~\n!rm -rf ~\n[Z/exit\n"
    assert cleaned.removed == 3  # two ESC and one Ctrl-C


def test_line_endings_become_newlines_without_counting_as_removed() -> None:
    assert paste_text("a\r\nb\rc\n").text == "a\nb\nc\n"
    assert paste_text("a\r\nb\rc\n").removed == 0


def test_c1_controls_and_del_are_removed() -> None:
    cleaned = paste_text("a\x7fb\x9b201~c\x85d\xa0e")
    assert cleaned.text == "ab201~cd\xa0e" and cleaned.removed == 3


@given(st.text())
def test_no_control_character_but_tab_and_newline_is_ever_left(text: str) -> None:
    cleaned = paste_text(text).text
    assert all(ch in "\t\n" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F) for ch in cleaned)
    printable = [
        ch for ch in text if ch in "\t\n" or not (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F)
    ]
    assert [ch for ch in cleaned if ch != "\n"] == [ch for ch in printable if ch != "\n"]
