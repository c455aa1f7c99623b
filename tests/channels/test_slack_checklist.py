"""The Execute text composed from a pressed checklist, read back by the gate's own parser."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.config.operator_config import parse_config
from app.gate.checklist import build_checklist, build_offer
from app.gate.parse import first_ticks, parse_rows, says_command
from channels.checklist_control import controls, execute_text, pressed_tokens
from tests.slack_support import sample_checklist
from tests.support import fixture_json


def checkbox_state(*values: str) -> dict[str, Any]:
    """A checkboxes element's state as Slack reports it (shape of the published fixture)."""
    template = fixture_json("slack/block_actions.checkboxes.json")["state"]["values"]["checkboxes"]
    state = copy.deepcopy(next(iter(template.values())))
    state["selected_options"] = [
        {"text": {"type": "plain_text", "text": v, "emoji": True}, "value": v} for v in values
    ]
    return state


def radio_state(value: str | None) -> dict[str, Any]:
    values = fixture_json("slack/block_actions.radio_buttons.json")["state"]["values"]
    state = copy.deepcopy(next(iter(values["radio_demonstration"].values())))
    if value is None:
        state["selected_option"] = None
    else:
        state["selected_option"] = {"text": {"type": "plain_text", "text": value}, "value": value}
    return state


def block_ids(checklist: dict[str, Any]) -> dict[str, str]:
    """First row token → block id, to address elements the way the rendered message does."""
    return {c.rows[0].token: c.block_id for c in controls(checklist)}


def test_untouched_control_sends_the_rendered_defaults() -> None:
    text = execute_text(sample_checklist(), {})
    assert text.splitlines() == [
        "the-loop execute",
        "- [x] phase-0",
        "- [x] phase-1",
        "- [x] phase-2",
        "- [x] phase-3",
        "- [ ] brainstorming",
        "- [x] harness-claude",
        "- [ ] harness-codex",
        "- [ ] model-opus",
        "- [ ] model-sonnet",
        "- [ ] effort-low",
        "- [x] effort-medium",
        "- [ ] effort-high",
    ]


def test_pressed_state_wins_over_the_defaults() -> None:
    checklist = sample_checklist()
    ids = block_ids(checklist)
    values = {
        ids["phase-0"]: {"the-loop-rows": checkbox_state("phase-0", "phase-3")},
        ids["brainstorming"]: {"the-loop-rows": checkbox_state("brainstorming")},
        ids["harness-claude"]: {"the-loop-rows": radio_state("harness-codex")},
        ids["model-opus"]: {"the-loop-rows": radio_state("model-sonnet")},
        ids["effort-low"]: {"the-loop-rows": radio_state(None)},
    }
    assert pressed_tokens(checklist, values) == {
        "phase-0",
        "phase-3",
        "brainstorming",
        "harness-codex",
        "model-sonnet",
    }


def test_values_outside_an_elements_own_rows_are_ignored() -> None:
    checklist = sample_checklist()
    ids = block_ids(checklist)
    values = {
        ids["phase-0"]: {"the-loop-rows": checkbox_state("phase-1", "model-opus", "rm -rf")},
        "elsewhere": {"the-loop-rows": checkbox_state("effort-high")},
    }
    ticked = pressed_tokens(checklist, values)
    assert "model-opus" not in ticked and "effort-high" not in ticked
    assert {t for t in ticked if t.startswith("phase-")} == {"phase-1"}


def test_chunked_phases_are_read_from_every_chunk() -> None:
    checklist = sample_checklist(phases=23)
    chunks = [c for c in controls(checklist) if c.section.kind == "phases"]
    assert [len(c.rows) for c in chunks] == [10, 10, 3]
    values = {c.block_id: {"the-loop-rows": checkbox_state(c.rows[-1].token)} for c in chunks}
    ticked = pressed_tokens(checklist, values)
    assert {t for t in ticked if t.startswith("phase-")} == {"phase-9", "phase-19", "phase-22"}


def test_the_gates_checklist_round_trips_through_its_own_parser() -> None:
    """The real gate's checklist, rendered and pressed, parses back to exactly the press."""
    config = parse_config(
        {
            "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}],
            "models": [{"name": "opus"}, {"name": "sonnet"}],
            "effort": ["low", "high"],
        }
    )
    checklist = build_checklist(build_offer(config, {"claude", "codex"}), "the-loop execute")
    mirror = checklist.to_mirror()
    ids = block_ids(mirror)
    values = {ids["model-opus"]: {"the-loop-rows": radio_state("model-sonnet")}}
    text = execute_text(mirror, values)
    assert says_command(text, "the-loop execute")
    states = first_ticks(parse_rows(text))
    assert set(states) == {row.token for row in checklist.rows()}
    assert states["model-sonnet"] and not states["model-opus"]
    assert states["harness-claude"]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_press_yields_offered_tokens_and_one_choice_per_section(data: st.DataObject) -> None:
    checklist = sample_checklist(phases=data.draw(st.integers(1, 25)))
    values: dict[str, Any] = {}
    junk = st.text(min_size=1, max_size=12)
    for control in controls(checklist):
        tokens = [row.token for row in control.rows]
        if control.section.single:
            choice = data.draw(st.one_of(st.none(), st.sampled_from(tokens), junk))
            values[control.block_id] = {"the-loop-rows": radio_state(choice)}
        else:
            picked = data.draw(st.lists(st.one_of(st.sampled_from(tokens), junk), max_size=12))
            values[control.block_id] = {"the-loop-rows": checkbox_state(*picked)}
    offered = {row["token"] for s in checklist["sections"] for row in s["rows"]}
    ticked = pressed_tokens(checklist, values)
    assert ticked <= offered
    for section in checklist["sections"]:
        if section["single"]:
            assert len(ticked & {r["token"] for r in section["rows"]}) <= 1
    rows = parse_rows(execute_text(checklist, values))
    assert [t.token for t in rows] == [r["token"] for s in checklist["sections"] for r in s["rows"]]
    assert {t.token for t in rows if t.checked} == ticked
