"""The checklist comment and its structured form: what is offered, and how it reads."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from app.config.offered_harnesses import HOSTING_ADAPTERS
from app.config.operator_config import parse_config
from app.gate.checklist import SectionKind, build_checklist, build_offer
from app.gate.markers import MarkerKind, find_marker
from app.gate.parse import issue_base
from app.gate.render import MAX_SHOWN, render_checklist

ITEM = "github:Codertocat/Hello-World#1"
KEYWORD = "the-loop execute"

# The phases-only checklist, byte for byte: what an operator who declared no harness choice,
# no models and no effort levels sees.
PHASES_ONLY = """\
### the-loop: choose what runs

Tick what this work needs, then reply with a comment that starts with `the-loop execute`.
The boxes as they are when you reply are what runs; a checklist in your reply wins over the boxes here.

**Phases** · untick a phase to skip it
- [x] `requirements-definition` — requirements (requirements.md or bugfix.md)
- [x] `design` — design (design.md)
- [x] `test-planning` — testing plan (testing-plan.md)
- [x] `tasks-breakdown` — task list (tasks.md)

**Opt-in phases** · tick a phase to add it
- [ ] `brainstorming` — explore the problem before writing requirements

**Approval gates** · tick to stop for your `approve` or `changes` after that phase
- [ ] `approve-design` — stop for your approval after the design (design.md)
- [ ] `approve-tasks` — stop for your approval after the task list (tasks.md)

Always run: implementation, verification, review.

**Base branch** · the repository's default branch (reply `the-loop execute base:<branch>` to start from another).

Only someone with write access to this repository (or listed in the operator's `routing.authorizedUsers`) can reply `the-loop execute`.

<!-- the-loop:checklist item=github:Codertocat/Hello-World#1 -->
"""


def render(
    data: dict[str, Any], hosts: Collection[str] = HOSTING_ADAPTERS, refused: Collection[str] = ()
) -> str:
    offer = build_offer(parse_config(data), hosts, refused)
    return render_checklist(build_checklist(offer, KEYWORD), ITEM)


def test_nothing_declared_renders_the_phases_only_checklist_byte_for_byte():
    assert render({}) == PHASES_ONLY


def test_one_hostable_harness_and_no_models_or_effort_is_still_phases_only():
    declared = {
        "harnesses": [{"name": "claude", "default": True, "args": ["--x"]}, {"name": "codex"}],
        "routing": {"authorizedUsers": ["octocat"]},
    }
    # codex is declared but no spawner here can host it: one offerable harness, no section.
    assert render(declared, hosts={"claude"}) == PHASES_ONLY


def test_the_base_branch_line_names_the_issues_base_else_the_default():
    checklist = build_checklist(build_offer(parse_config({}), HOSTING_ADAPTERS, ()), KEYWORD)
    default = render_checklist(checklist, ITEM, default_branch="main")
    assert "**Base branch** · `main`, the repository's default (reply `the-loop execute " in default
    named = render_checklist(checklist, ITEM, default_branch="main", named_base="release/2.4")
    assert "**Base branch** · `release/2.4`, named by the issue's `base:` line" in named
    assert "`main`" not in named


def test_an_issue_names_its_base_on_a_line_of_its_own():
    assert issue_base("Fix it.\n\nbase: release/2.4\n") == "release/2.4"
    assert issue_base("Base: `feature/x`") == "feature/x"
    assert issue_base("rebase: onto main later") is None  # not a line of its own
    assert issue_base("the base: is wrong here") is None
    assert issue_base(None) is None
    assert issue_base("base: a\nbase: b") == "a"  # the first line decides


def test_the_operators_approve_after_ticks_the_approval_rows():
    text = render({"routing": {"gates": {"approveAfter": ["tasks-breakdown"]}}})
    assert "- [ ] `approve-design` — stop for your approval after the design" in text
    assert "- [x] `approve-tasks` — stop for your approval after the task list" in text


def test_harness_rows_appear_with_two_offerable_harnesses_default_preticked():
    text = render(
        {"harnesses": [{"name": "claude"}, {"name": "codex", "default": True}]},
        hosts={"claude", "codex"},
    )
    assert "**Harness** · default: `codex`; tick at most one" in text
    assert "- [ ] `harness-claude`\n- [x] `harness-codex`" in text


def test_model_rows_follow_the_default_harness_without_a_harness_section():
    text = render(
        {
            "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}],
            "models": [{"name": "gpt", "harnesses": ["codex"]}, {"name": "opus"}],
            "effort": ["low", "max"],
        },
        hosts={"claude"},
    )
    assert "`model-gpt`" not in text and "- [ ] `model-opus`" in text
    assert "**Model** · default: the harness's own; tick at most one" in text
    assert "- [ ] `effort-low`\n- [ ] `effort-max`" in text


def test_model_rows_are_the_union_in_declared_order_with_a_harness_section():
    text = render(
        {
            "harnesses": [{"name": "claude"}, {"name": "codex"}],
            "models": [
                {"name": "gpt", "harnesses": ["codex"]},
                {"name": "opus", "harnesses": ["claude"]},
                {"name": "other", "harnesses": ["cursor"]},
            ],
        },
        hosts={"claude", "codex"},
    )
    assert "- [ ] `model-gpt`\n- [ ] `model-opus`\n\n" in text
    assert "model-other" not in text


def test_refused_choices_are_not_offered():
    text = render(
        {"models": [{"name": "opus"}, {"name": "haiku"}], "effort": ["max"]},
        refused={"model-haiku", "effort-max"},
    )
    assert "`model-opus`" in text and "haiku" not in text and "Effort" not in text


def test_more_than_twelve_choices_show_twelve_and_say_how_many_more():
    models = [{"name": f"m{i:02d}"} for i in range(15)]
    text = render({"models": models})
    assert "- [ ] `model-m11`" in text and "model-m12" not in text
    assert "…and 3 more" in text
    assert MAX_SHOWN == 12


def test_the_marker_closes_the_comment_and_names_the_item():
    text = render({})
    assert text.rstrip().splitlines()[-1].startswith("<!-- the-loop:checklist")
    found = find_marker(text)
    assert found is not None and found.kind == MarkerKind.CHECKLIST
    assert found.attrs["item"] == ITEM


def test_a_configured_keyword_is_what_the_checklist_asks_for():
    offer = build_offer(parse_config({}), HOSTING_ADAPTERS)
    text = render_checklist(build_checklist(offer, "loop go"), ITEM)
    assert "starts with `loop go`" in text and "the-loop execute" not in text


def test_to_mirror_carries_every_section_with_its_rows_and_defaults():
    offer = build_offer(
        parse_config(
            {
                "harnesses": [{"name": "claude", "default": True}, {"name": "codex"}],
                "models": [{"name": f"m{i}"} for i in range(14)],
                "effort": ["high"],
            }
        ),
        {"claude", "codex"},
    )
    checklist = build_checklist(offer, KEYWORD)
    mirrored = checklist.to_mirror()
    assert mirrored["keyword"] == KEYWORD and mirrored["comment_id"] is None
    kinds = [s["kind"] for s in mirrored["sections"]]
    assert kinds == ["phases", "opt-in", "gates", "harness", "model", "effort"]
    harness = mirrored["sections"][3]
    assert harness == {
        "kind": "harness",
        "title": "Harness",
        "single": True,
        "default": "claude",
        "rows": [
            {"token": "harness-claude", "label": "claude", "checked": True},
            {"token": "harness-codex", "label": "codex", "checked": False},
        ],
    }
    assert len(mirrored["sections"][4]["rows"]) == 14  # a chat control chooses its own layout
    assert mirrored["sections"][0]["single"] is False
    assert checklist.section(SectionKind.EFFORT) is not None
