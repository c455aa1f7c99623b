"""From ticks to a frozen choice: resolution order, dropped ticks, and what can never be frozen."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.config.operator_config import parse_config
from app.gate.checklist import Checklist, Offer, build_checklist, build_offer
from app.gate.classify import Selection, classify
from app.gate.freeze import frozen_record
from app.gate.parse import parse_rows, says_command
from app.gate.phases import CHOOSABLE
from app.gate.render import render_checklist

KEYWORD = "the-loop execute"
TWO = {
    "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}, {"name": "cursor"}],
    "models": [{"name": "opus", "harnesses": ["claude"]}, {"name": "gpt"}],
    "effort": ["low", "high"],
}


def setup(
    data: dict[str, Any], hosts: Iterable[str] = ("claude", "codex"), refused: Iterable[str] = ()
) -> tuple[Offer, Checklist]:
    offer = build_offer(parse_config(data), set(hosts), set(refused))
    return offer, build_checklist(offer, KEYWORD)


def choose(data: dict[str, Any], reply: str, board: str = "", **kw: Any) -> Selection:
    offer, checklist = setup(data, **kw)
    return classify(offer, checklist, parse_rows(board), parse_rows(reply))


def test_untouched_checklist_runs_every_phase_but_opt_in_and_the_defaults():
    offer, checklist = setup(TWO)
    board = render_checklist(checklist, "github:o/r#1")
    selection = classify(offer, checklist, parse_rows(board), parse_rows(KEYWORD))
    assert selection.skips == ("brainstorming", "approve-design", "approve-tasks")
    assert (selection.harness, selection.model, selection.effort) == ("claude", "", "")
    assert selection.dropped == ()


def test_harness_resolves_first_and_a_model_it_cannot_run_is_dropped_and_named():
    selection = choose(TWO, "- [x] harness-codex\n- [ ] harness-claude\n- [x] model-opus")
    assert (selection.harness, selection.model) == ("codex", "")
    assert [(d.token, d.reason) for d in selection.dropped] == [
        ("model-opus", "`opus` cannot run on harness `codex`")
    ]


def test_a_model_the_resolved_harness_runs_is_chosen():
    selection = choose(TWO, "- [x] harness-codex\n- [ ] harness-claude\n- [x] model-gpt")
    assert (selection.harness, selection.model, selection.resolved_harness) == (
        "codex",
        "gpt",
        "codex",
    )


def test_two_ticks_in_a_section_are_no_choice_for_that_section_only():
    selection = choose(TWO, "- [x] model-opus\n- [x] model-gpt\n- [x] effort-high")
    assert (selection.model, selection.effort) == ("", "high")
    assert {d.token for d in selection.dropped} == {"model-opus", "model-gpt"}
    assert all("tick at most one" in d.reason for d in selection.dropped)


def test_ticking_another_harness_without_unticking_the_default_keeps_the_default():
    offer, checklist = setup(TWO)
    ticked = {r.token for r in checklist.rows() if r.checked} | {"harness-codex"}
    board = render_checklist(checklist.with_ticks(ticked), "i")  # harness-claude pre-ticked
    selection = classify(offer, checklist, parse_rows(board), ())
    assert (selection.harness, selection.resolved_harness) == ("", "claude")
    assert {d.token for d in selection.dropped} == {"harness-claude", "harness-codex"}


def test_declared_but_unhostable_harness_is_dropped_unknown_tokens_are_ignored():
    selection = choose(TWO, "- [x] harness-cursor\n- [ ] harness-claude\n- [x] harness-sh\n- [x] x")
    assert selection.harness == "" and selection.resolved_harness == "claude"
    assert [(d.token, d.reason) for d in selection.dropped] == [
        ("harness-cursor", "harness `cursor` cannot host a session here")
    ]


def test_without_a_harness_section_a_harness_tick_chooses_nothing():
    selection = choose(TWO, "- [x] harness-codex", hosts=("claude",))
    assert (selection.harness, selection.resolved_harness) == ("", "claude")
    assert selection.harness_offered is False
    assert [d.token for d in selection.dropped] == ["harness-codex"]


def test_refused_choices_are_dropped_with_the_reason():
    selection = choose(
        TWO, "- [x] model-gpt\n- [x] effort-high", refused={"model-gpt", "effort-high"}
    )
    assert (selection.model, selection.effort) == ("", "")
    assert {d.reason for d in selection.dropped} == {"refused by `the-loop models check`"}


def test_reply_wins_per_section_and_phase_rows_merge_row_by_row():
    offer, checklist = setup(TWO)
    board = "- [ ] design\n- [ ] test-planning\n- [x] model-gpt\n- [x] effort-low\n"
    reply = "the-loop execute\n- [x] design\n- [x] effort-high\n- [ ] effort-low"
    selection = classify(offer, checklist, parse_rows(board), parse_rows(reply))
    assert "design" not in selection.skips and "test-planning" in selection.skips
    assert (selection.model, selection.effort) == ("gpt", "high")


def test_opt_in_ticked_runs_and_unticked_skippable_is_skipped():
    selection = choose({}, "- [x] brainstorming\n- [ ] requirements-definition\n- [ ] review")
    assert selection.skips == ("requirements-definition", "approve-design", "approve-tasks")


def test_approval_gates_are_off_unless_ticked_or_defaulted_by_the_operator():
    assert "approve-design" in choose({}, "").skips
    ticked = choose({}, "- [x] approve-design")
    assert "approve-design" not in ticked.skips and "approve-tasks" in ticked.skips
    defaulted = {"routing": {"gates": {"approveAfter": ["design", "tasks-breakdown"]}}}
    assert not {"approve-design", "approve-tasks"} & set(choose(defaulted, "").skips)
    unticked = choose(defaulted, "- [ ] approve-tasks")
    assert "approve-tasks" in unticked.skips and "approve-design" not in unticked.skips


def test_no_stop_for_approval_after_a_phase_that_does_not_run():
    selection = choose({}, "- [ ] design\n- [x] approve-design\n- [x] approve-tasks")
    assert {"design", "approve-design"} <= set(selection.skips)
    assert "approve-tasks" not in selection.skips


def test_the_text_a_slack_execute_composes_freezes_what_was_pressed():
    offer, checklist = setup(TWO)
    mirrored = checklist.to_mirror()
    pressed = {
        "design": False,
        "brainstorming": True,
        "harness-codex": True,
        "harness-claude": False,
        "model-gpt": True,
        "effort-low": True,
    }
    lines = [
        ("- [x] " if pressed.get(row["token"], row["checked"]) else "- [ ] ") + row["token"]
        for section in mirrored["sections"]
        for row in section["rows"]
    ]
    text = mirrored["keyword"] + "\n" + "\n".join(lines)
    assert says_command(text, KEYWORD)
    selection = classify(offer, checklist, (), parse_rows(text))
    frozen = frozen_record(selection, "octocat", datetime(2026, 1, 2, tzinfo=UTC))
    assert frozen == {
        "decisions": {"phase-selection": {"at": "2026-01-02T00:00:00+00:00", "by": "octocat"}},
        "skips": {
            "design": {"by": "octocat"},
            "approve-design": {"by": "octocat"},
            "approve-tasks": {"by": "octocat"},
        },
        "harness": "codex",
        "model": "gpt",
        "effort": "low",
        "dropped": [],
        "base": "",
        "stops": [],
    }


NAMES = st.sampled_from(["claude", "codex", "cursor", "opus", "gpt", "low", "high", "x.1"])
EVIL = st.sampled_from(
    ["harness-../../bin/sh", "model-$(rm", "effort-;reboot", "harness-", "model-", "--model"]
)


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], set[str], set[str]]:
    harnesses = draw(st.lists(st.sampled_from(["claude", "codex", "cursor"]), unique=True))
    default = draw(st.sampled_from([None, *harnesses]))
    models = draw(st.lists(st.sampled_from(["opus", "gpt", "x.1"]), unique=True))
    narrowing = st.none() | st.lists(st.sampled_from(harnesses or ["claude"]), unique=True)
    data = {
        "harnesses": [{"name": h, "default": h == default} for h in harnesses],
        "models": [{"name": m, "harnesses": draw(narrowing)} for m in models],
        "effort": draw(st.lists(st.sampled_from(["low", "high", "max"]), unique=True)),
    }
    hosts = draw(st.sets(st.sampled_from(["claude", "codex", "cursor", "pi"])))
    refused = draw(st.sets(st.sampled_from(["model-opus", "model-gpt", "effort-max"])))
    return data, hosts, refused


TOKENS = (
    st.builds(lambda p, n: p + n, st.sampled_from(["harness-", "model-", "effort-", ""]), NAMES)
    | st.sampled_from(sorted(CHOOSABLE | {"review", "implementation"}))
    | EVIL
    | st.text(min_size=1, max_size=12)
)
LINES = st.lists(
    st.builds(
        lambda q, box, tok: f"{q}- [{box}] {tok}",
        st.sampled_from(["", "> ", ">> ", "  "]),
        st.sampled_from([" ", "x", "X"]),
        TOKENS,
    )
    | st.text(max_size=30),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(configs(), LINES, LINES)
def test_nothing_outside_the_operator_declared_names_is_ever_frozen(config, board, reply):
    data, hosts, refused = config
    offer, checklist = setup(data, hosts=hosts, refused=refused)
    selection = classify(
        offer, checklist, parse_rows("\n".join(board)), parse_rows("\n".join(reply))
    )
    frozen = frozen_record(selection, "octocat", datetime(2026, 1, 1, tzinfo=UTC))
    declared = parse_config(data)
    assert frozen["harness"] in {"", *offer.harnesses}
    if frozen["harness"]:
        assert declared.harness(frozen["harness"]) is not None and frozen["harness"] in hosts
    resolved = frozen["harness"] or offer.default_harness
    assert frozen["model"] in {"", *offer.models_on(resolved)}
    assert f"model-{frozen['model']}" not in refused
    assert frozen["effort"] in {"", *(e.name for e in declared.effort)}
    assert f"effort-{frozen['effort']}" not in refused
    assert set(frozen["skips"]) <= CHOOSABLE
    declared_tokens = (
        {f"harness-{h.name}" for h in declared.harnesses}
        | {f"model-{m.name}" for m in declared.models}
        | {f"effort-{e.name}" for e in declared.effort}
    )
    assert {d["token"] for d in frozen["dropped"]} <= declared_tokens
