"""Reading comment text: the execute keyword, the row grammar, and render → parse round trips."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.config.operator_config import parse_config
from app.gate.checklist import build_checklist, build_offer
from app.gate.ids import branch_name_ok
from app.gate.markers import (
    Marker,
    MarkerKind,
    defuse,
    find_marker,
    has_marker,
    is_own_comment,
    marker,
)
from app.gate.parse import Tick, execute_base, first_ticks, parse_rows, says_command
from app.gate.render import render_checklist

KEYWORD = "the-loop execute"


@pytest.mark.parametrize(
    "body",
    [
        "the-loop execute",
        "The-Loop EXECUTE please",
        "  the-loop execute\n- [x] design",
        "the-loop execute.",
        "\ufeffthe-loop execute",
    ],
)
def test_a_reply_starting_with_the_keyword_is_an_execute(body):
    assert says_command(body, KEYWORD)


@pytest.mark.parametrize(
    "body",
    [
        "",
        None,
        "please the-loop execute",
        "the-loop executed it yesterday",
        "the-loop execute-now",
        "> the-loop execute",
        "the-loop",
    ],
)
def test_anything_else_is_not_an_execute(body):
    assert not says_command(body, KEYWORD)


def test_rows_in_every_accepted_spelling():
    text = "\n".join(
        [
            "- [x] design",
            "- [ ] `test-planning` — testing plan",
            "* [X] model-opus",
            "+ [ ] effort-high",
            "> - [x] harness-codex",
            ">> - [ ] brainstorming",
            "   - [x] tasks-breakdown",
            "- [x]",
            "- [y] design",
            "-[x] design",
            "- [x] -rf",
            "text - [x] design",
        ]
    )
    assert parse_rows(text) == (
        Tick("design", True),
        Tick("test-planning", False),
        Tick("model-opus", True),
        Tick("effort-high", False),
        Tick("harness-codex", True),
        Tick("brainstorming", False),
        Tick("tasks-breakdown", True),
    )


def test_rows_inside_fenced_code_are_not_rows():
    text = (
        "```\n- [x] model-opus\n```\n~~~\n- [x] effort-high\n```\n- [x] design\n~~~\n- [ ] design"
    )
    assert parse_rows(text) == (Tick("design", False),)


def test_the_first_row_naming_a_token_decides_it():
    ticks = parse_rows("- [ ] design\n- [x] design\n- [x] model-a")
    assert first_ticks(ticks) == {"design": False, "model-a": True}


def test_rendered_checklist_parses_back_to_its_boxes():
    offer = build_offer(
        parse_config(
            {
                "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}],
                "models": [{"name": "opus"}, {"name": "sonnet.4-5"}],
                "effort": ["low", "high"],
            }
        ),
        {"claude", "codex"},
    )
    checklist = build_checklist(offer, KEYWORD).with_ticks({"design", "model-sonnet.4-5"})
    parsed = first_ticks(parse_rows(render_checklist(checklist, "github:o/r#1")))
    assert parsed == {row.token: row.checked for row in checklist.rows()}


@given(st.sets(st.sampled_from(["design", "test-planning", "brainstorming", "model-opus"])))
def test_round_trip_holds_for_any_tick_state(ticked):
    offer = build_offer(parse_config({"models": [{"name": "opus"}]}), {"claude"})
    checklist = build_checklist(offer, KEYWORD).with_ticks(ticked)
    parsed = first_ticks(parse_rows(render_checklist(checklist, "github:o/r#1")))
    assert {t for t, on in parsed.items() if on} == set(ticked)


@given(st.text())
def test_parsing_never_fails_and_tokens_are_always_plain_names(text):
    for tick in parse_rows(text):
        assert tick.token[0].isalnum() and " " not in tick.token and "`" not in tick.token


def test_markers_round_trip_and_cannot_close_the_comment_early():
    text = marker(MarkerKind.SLACK, member="U024 BE7LH-->", thread=None)
    assert text == "<!-- the-loop:slack member=U024BE7LH-- -->"
    found = find_marker("hello\n" + text)
    assert found is not None and found.kind == "slack" and found.attrs == {"member": "U024BE7LH--"}
    assert marker("agent") == "<!-- the-loop:agent -->"
    with pytest.raises(ValueError):
        marker("Bad Kind")


@given(st.text() | st.sampled_from(["<!-- the-loop:review item=x round=1 -->", "<!--the-loop:"]))
def test_defused_words_followed_by_the_apps_marker_read_as_that_marker(words):
    """Whatever someone else wrote, once defused and followed by the App's own marker, the
    comment reads as the App's marker and nothing in the words is a marker at all."""
    body = defuse(words + " <!-- the-loop:checklist item=y -->") + "\n" + marker("notice", n=1)
    assert find_marker(body) == Marker("notice", {"n": "1"})
    assert find_marker(defuse(words)) is None


def test_own_comments_are_bot_authored_or_marked():
    human = {"user": {"login": "octocat", "type": "User"}}
    assert not is_own_comment({**human, "body": "the-loop execute"})
    assert is_own_comment({**human, "body": "the-loop execute\n<!--the-loop:agent -->"})
    assert is_own_comment({"user": {"login": "x[bot]", "type": "Bot"}, "body": "the-loop execute"})
    assert has_marker("<!-- the-loop:whatever with junk")
    assert not has_marker("the-loop: auto-execute")


@pytest.mark.parametrize(
    ("body", "base"),
    [
        ("the-loop execute base:release/2.4", "release/2.4"),
        ("  The-Loop Execute   BASE:release/2.4 please\n- [x] design", "release/2.4"),
        ("the-loop execute base:main base:other", "main"),
        ("the-loop execute base:", ""),
        ("the-loop execute", None),
        ("the-loop execute\nbase:release/2.4", None),  # only the execute line says
        ("the-loop execute rebase:x", None),
        ("please the-loop execute base:x", None),  # not an execute at all
    ],
)
def test_an_execute_line_may_name_its_base_branch(body: str, base: str | None) -> None:
    assert execute_base(body, KEYWORD) == base


NAMES = [
    "release/2.4",
    "main",
    "feature/a-b_c.d",
    "v1.0",
    "a@b",
    "",
    "-x",
    "a..b",
    "a b",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[b",
    "a\\b",
    "a@{1}",
    "HEAD",
    "/a",
    "a/",
    "a//b",
    "a.",
    ".a",
    "a/.b",
    "a.lock",
    "a/b.lock/c",
    "a\x7fb",
    "a\tb",
]


@pytest.mark.parametrize("name", NAMES)
def test_a_base_name_is_held_to_gits_branch_rules(name: str) -> None:
    """`branch_name_ok` agrees with `git check-ref-format --branch` itself."""
    git = subprocess.run(
        ["git", "check-ref-format", "--branch", name], capture_output=True, check=False
    )
    assert branch_name_ok(name) is (git.returncode == 0)


def test_a_base_name_git_would_read_as_head_is_refused() -> None:
    """`@` passes `check-ref-format --branch` as a shorthand for HEAD: it names no base."""
    assert not branch_name_ok("@")
    assert not branch_name_ok("x" * 256)
