"""The frozen record read back (agent-writable), and the texts written after an execute."""

from __future__ import annotations

from datetime import UTC, datetime

from app.config.operator_config import parse_config
from app.gate.classify import Dropped, Selection
from app.gate.confirm import (
    confirmation_markdown,
    initial_prompt,
    refusal_markdown,
    who_may_execute,
)
from app.gate.freeze import frozen_record, frozen_skips, revalidate
from app.gate.markers import MarkerKind, find_marker
from app.gate.phases import CHOOSABLE
from app.graph import NODES

CONFIG = parse_config(
    {
        "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}, {"name": "pi"}],
        "models": [{"name": "opus", "harnesses": ["claude"]}, {"name": "gpt"}],
        "effort": ["low", "high"],
    }
)
HOSTS = {"claude", "codex"}


def selection(**kw: object) -> Selection:
    base: dict[str, object] = {
        "skips": (),
        "harness": "",
        "model": "",
        "effort": "",
        "resolved_harness": "claude",
        "harness_offered": False,
        "dropped": (),
    }
    return Selection(**{**base, **kw})  # type: ignore[arg-type]


def test_a_valid_frozen_choice_reads_back_unchanged():
    choice = revalidate({"harness": "codex", "model": "gpt", "effort": "high"}, CONFIG, HOSTS)
    assert (choice.harness, choice.model, choice.effort, choice.warnings) == (
        "codex",
        "gpt",
        "high",
        (),
    )


def test_forged_values_fall_back_to_the_default_with_a_warning_each():
    forged = {"harness": "pi", "model": "opus", "effort": "--dangerously-skip-permissions"}
    choice = revalidate(forged, CONFIG, HOSTS)
    assert (choice.harness, choice.model, choice.effort) == ("claude", "opus", "")
    assert len(choice.warnings) == 2
    assert "cannot host" in choice.warnings[0] and "not declared" in choice.warnings[1]

    undeclared = revalidate({"harness": "/bin/sh", "model": 7, "effort": None}, CONFIG, HOSTS)
    assert (undeclared.harness, undeclared.model, undeclared.effort) == ("claude", "", "")
    assert "not declared" in undeclared.warnings[0]


def test_a_model_the_resolved_harness_cannot_run_falls_back():
    choice = revalidate({"harness": "codex", "model": "opus"}, CONFIG, HOSTS)
    assert (choice.harness, choice.model) == ("codex", "")
    assert "not offered on 'codex'" in choice.warnings[0]
    refused = revalidate({"model": "gpt", "effort": "low"}, CONFIG, HOSTS, {"model-gpt"})
    assert (refused.model, refused.effort) == ("", "low")


def test_the_checklist_offers_exactly_the_graphs_skippable_phases():
    assert {n.name for n in NODES if n.skippable} == CHOOSABLE


def test_confirmation_names_skips_harness_model_effort_and_every_dropped_tick():
    text = confirmation_markdown(
        selection(
            skips=("brainstorming", "design"),
            harness="codex",
            resolved_harness="codex",
            harness_offered=True,
            effort="high",
            dropped=(Dropped("model-opus", "`opus` cannot run on harness `codex`"),),
        ),
        "octocat",
        "github:o/r#1",
    )
    assert "**Phases skipped:** `brainstorming`, `design` (by @octocat)" in text
    assert "**Harness:** `codex`" in text
    assert "**Model:** the default (the harness's own)" in text
    assert "**Effort:** `high`" in text
    assert "- `model-opus`: `opus` cannot run on harness `codex`" in text
    assert "Starting" in text
    found = find_marker(text)
    assert found is not None and found.kind == MarkerKind.CONFIRMATION


def test_confirmation_leaves_out_the_harness_when_no_choice_was_offered():
    text = confirmation_markdown(selection(), "octocat", "github:o/r#1")
    assert "Harness" not in text and "**Phases skipped:** none" in text
    assert "dropped" not in text


def test_refusal_is_one_short_reply_saying_who_may_execute():
    may = who_may_execute(None, "o/r", "the-loop execute")
    text = refusal_markdown("mallory", "@mallory has 'read' permission", may, "github:o/r#1", "9")
    assert text.splitlines()[0] == (
        "@mallory, this did not start the work: @mallory has 'read' permission. "
        "People with write, maintain or admin access to o/r may reply `the-loop execute`."
    )
    found = find_marker(text)
    assert found is not None and found.attrs == {"item": "github:o/r#1", "ref": "9"}
    assert who_may_execute(["a", "b"], "o/r", "go") == "Only @a, @b may reply `go`."
    assert "Nobody" in who_may_execute([], "o/r", "go")


def test_prompt_carries_the_issue_the_phases_in_force_and_how_to_talk_back():
    prompt = initial_prompt(
        title="Fix it",
        body="Steps\x00 to reproduce" + "x" * 65_530 + "END",
        url="https://github.com/o/r/issues/1",
        spec_id="issue-1",
        selection=selection(skips=("brainstorming", "design", "approve-design")),
        unattended=True,
    )
    assert prompt.startswith("Work on the GitHub issue https://github.com/o/r/issues/1: Fix it")
    assert "docs/specs/issue-1/" in prompt and "\x00" not in prompt
    assert (
        "in order: requirements-definition, test-planning, tasks-breakdown, approve-tasks, "
        "implementation, verification, review." in prompt
    )
    assert "Skipped by the human: brainstorming, design." in prompt
    assert "At `approve-tasks` a human reads the phase's artifact" in prompt
    assert "the-loop ask" in prompt and "Steps to reproduce" + "x" * 65_530 + "END" in prompt
    assert "cut" not in prompt
    quiet = initial_prompt(
        title="t", body="", url="u", spec_id="issue-1", selection=selection(), unattended=False
    )
    assert "the-loop ask" not in quiet and "(empty)" in quiet


def test_a_record_names_the_gates_ticked_and_an_older_record_stops_at_none():
    record = frozen_record(
        selection(skips=("brainstorming", "approve-tasks")), "op", datetime(2026, 1, 1, tzinfo=UTC)
    )
    assert record["stops"] == ["approve-design"]
    assert set(frozen_skips(record)) == {"brainstorming", "approve-tasks"}
    older = {"skips": {"brainstorming": {"by": "op"}}}
    assert set(frozen_skips(older)) == {"brainstorming", "approve-design", "approve-tasks"}
    assert set(frozen_skips({"skips": ["design"], "stops": []})) == {"design"}
