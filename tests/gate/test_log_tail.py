"""What a session is shown of a CI job's log (`app.gate.log_tail`) and how `the-loop checks`
words the check runs and a log (`app.commands.ci_checks`): pure functions, no I/O."""

from __future__ import annotations

from app.commands.ci_checks import describe_checks, describe_log
from app.gate.log_tail import clean_log_text, log_tail
from app.github.actions_io import check_run_row, download_allowed


def numbered(n: int) -> bytes:
    return "".join(f"line {i:04d}\n" for i in range(1, n + 1)).encode()


def test_a_short_log_is_shown_whole():
    tail = log_tail(numbered(3))
    assert tail.text == "line 0001\nline 0002\nline 0003\n"
    assert tail.lines == 3 and tail.cut is False


def test_a_long_log_is_cut_to_its_last_lines():
    tail = log_tail(numbered(2500), max_lines=2000)
    lines = tail.text.splitlines()
    assert len(lines) == 2000 and tail.lines == 2000 and tail.cut is True
    assert lines[0] == "line 0501" and lines[-1] == "line 2500"


def test_the_byte_bound_holds_and_keeps_only_whole_lines():
    data = numbered(100)  # 10 bytes a line
    tail = log_tail(data, max_bytes=55)  # ends inside line 0095
    assert tail.cut is True
    assert tail.text.splitlines() == [f"line {i:04d}" for i in range(96, 101)]
    assert len(tail.text.encode()) <= 55
    on_boundary = log_tail(data, max_bytes=50)  # starts exactly at line 0096
    assert on_boundary.text.splitlines()[0] == "line 0096"


def test_a_log_whose_start_the_reader_dropped_loses_its_first_partial_line():
    tail = log_tail(b"ne 0007\nline 0008\n", began_earlier=True)
    assert tail.text == "line 0008\n" and tail.cut is True


def test_escapes_and_control_characters_cannot_reach_the_terminal():
    raw = (
        "\ufeff\x1b[36;1mrun tests\x1b[0m\r\n"
        "\x1b]0;new title\x07progress 10%\rprogress 100%\n"
        "bell\x07 back\x08space \x9bC1\tkept\n"
    )
    assert clean_log_text(raw) == (
        "run tests\nprogress 10%\nprogress 100%\nbell backspace C1\tkept\n"
    )
    bad_utf8 = log_tail(b"caf\xc3\xa9 \xff ok\n")
    assert bad_utf8.text == "caf\u00e9 \ufffd ok\n"


def test_the_listing_names_each_failing_run_and_counts_the_rest():
    shown = {
        "pull_request": {"number": 101, "head_sha": "abcdef0123456789"},
        "check_runs": [
            {
                "id": 7,
                "name": "lint",
                "status": "completed",
                "conclusion": "failure",
                "title": "2 errors",
            },
            {
                "id": 8,
                "name": "unit",
                "status": "completed",
                "conclusion": "timed_out",
                "title": "",
            },
            {"id": 9, "name": "docs", "status": "completed", "conclusion": "success"},
            {"id": 10, "name": "e2e", "status": "in_progress", "conclusion": ""},
        ],
    }
    assert describe_checks(shown) == (
        "Failing checks on pull request #101 at abcdef012345:\n"
        "  7  lint  failure — 2 errors\n"
        "  8  unit  timed_out\n"
        "Other checks: 1 running, 1 success.\n"
        "A failing job's log: `the-loop checks log <id>`.\n"
    )
    shown["check_runs"] = shown["check_runs"][2:]
    assert describe_checks(shown).startswith("No failing checks on pull request #101")


def test_a_log_is_introduced_by_the_run_and_says_when_it_was_cut():
    run = {"id": 7, "name": "lint", "conclusion": "failure"}
    whole = describe_log({"check_run": run, "log": "a\nb\n", "lines": 2, "cut": False})
    assert whole == "Log of check run 7 (lint: failure):\na\nb\n"
    cut = describe_log({"check_run": run, "log": "b\n", "lines": 1, "cut": True})
    assert cut.startswith("Log of check run 7 (lint: failure), its last 1 lines (the earlier")
    assert describe_log({"check_run": run, "log": "", "lines": 0}).endswith("the log is empty.\n")


def test_a_check_run_is_told_without_its_output_text_and_links_are_checked():
    run = {
        "id": 3,
        "name": "x",
        "status": "completed",
        "conclusion": "failure",
        "output": {"title": "t", "summary": "s", "text": "long"},
        "app": {"slug": "a"},
    }
    assert check_run_row(run) == {
        "id": 3,
        "name": "x",
        "status": "completed",
        "conclusion": "failure",
        "title": "t",
        "html_url": "",
    }
    api = "http://127.0.0.1:5000/"
    assert download_allowed("https://results.example/logs/1?sig=x", api)
    assert download_allowed("http://127.0.0.1:5000/_blobs/1", api)
    assert not download_allowed("http://results.example/logs/1", api)
    assert not download_allowed("file:///etc/passwd", api)
