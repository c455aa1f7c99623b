"""The process graph: node data, pure evaluation, the pointer-bounded gate rule (spec 003)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app import graph
from app.gate.phases import PHASES, PhaseKind
from app.graph import Evidence, NodeStatus, blocking_node, build_report
from app.workstate import WorkItemState
from tests.stopgate_support import NO_STOPS, REPRO_STATE
from tests.support import artifact

ROOT = Path(__file__).resolve().parents[2]
NOTHING = Evidence()
ALL_DOCS = frozenset(
    {"brainstorming.md", "requirements.md", "design.md", "testing-plan.md", "tasks.md"}
)


def state(**changes: Any) -> WorkItemState:
    """The reproduction state with `changes`, no approval gate ticked."""
    skips = {**NO_STOPS, **changes.pop("skips", REPRO_STATE["skips"])}
    return WorkItemState.from_dict({**REPRO_STATE, **changes, "skips": skips})


def report(
    st_: WorkItemState | None, evidence: Evidence = NOTHING, *, recompute: bool = True
) -> dict[str, Any]:
    return build_report("issue-1", st_, evidence, recompute=recompute, path="/x/state.json")


def statuses(rep: dict[str, Any]) -> dict[str, str]:
    return {n["node"]: n["status"] for n in rep["nodes"]}


def test_the_outer_loop_in_order() -> None:
    assert graph.NODE_NAMES == (
        "phase-selection",
        "brainstorming",
        "requirements-definition",
        "design",
        "approve-design",
        "test-planning",
        "tasks-breakdown",
        "approve-tasks",
        "implementation",
        "verification",
        "review",
        "complete",
    )
    assert graph.START_NODE == "phase-selection"


def test_the_graph_and_the_checklist_agree_on_what_a_human_may_skip() -> None:
    nodes = {n.name: n for n in graph.NODES}
    for phase in PHASES:
        node = nodes[phase.node]
        assert node.skippable == (phase.kind is not PhaseKind.REQUIRED), phase.node
        assert node.opt_in == (phase.kind in (PhaseKind.OPT_IN, PhaseKind.GATE)), phase.node
        assert (node.human_gate and node.skippable) == (phase.kind is PhaseKind.GATE), phase.node
    listed = {p.node for p in PHASES}
    assert {n.name for n in graph.NODES if n.skippable} <= listed


def test_reproduction_state_both_positions() -> None:
    plain = report(state(), recompute=False)
    derived = report(state())
    assert (plain["currentNode"], plain["pointer"], plain["ok"]) == (
        "phase-selection",
        "phase-selection",
        True,
    )
    assert (derived["currentNode"], derived["pointer"], derived["ok"]) == (
        "design",
        "phase-selection",
        False,
    )
    assert statuses(derived)["design"] == "block"
    assert blocking_node(derived) is None
    assert derived["parked"] == {"node": "phase-selection", "reason": "awaiting a human"}


def test_every_report_carries_the_same_keys_in_both_modes() -> None:
    keys = {
        "workItem",
        "currentNode",
        "pointer",
        "ok",
        "parked",
        "nodes",
        "statePath",
        "stateFound",
    }
    for st_ in (state(), None, state(currentNode="bogus")):
        for recompute in (False, True):
            assert set(report(st_, recompute=recompute)) == keys


def test_no_state_file_means_no_position() -> None:
    plain = report(None, recompute=False)
    assert (plain["currentNode"], plain["pointer"], plain["ok"], plain["stateFound"]) == (
        None,
        "",
        False,
        False,
    )
    assert statuses(plain)["phase-selection"] == "wait"
    assert blocking_node(report(None)) is None


def test_blocks_at_the_pointer_when_its_artifact_is_missing() -> None:
    node = blocking_node(report(state(currentNode="design")))
    assert node is not None and node["node"] == "design"
    assert node["messages"] == ["required artifact is missing (docs/specs/issue-1/design.md)"]


def test_requirements_accept_either_document_and_reject_an_empty_one() -> None:
    s = state(currentNode="requirements-definition", skips={"brainstorming": {}})
    assert blocking_node(report(s, Evidence(present=frozenset({"bugfix.md"})))) is None
    assert blocking_node(report(s, Evidence(present=frozenset({"requirements.md"})))) is None
    empty = blocking_node(report(s, Evidence(empty=frozenset({"bugfix.md"}))))
    assert empty is not None
    assert empty["messages"] == [
        "required artifact is empty or too short (docs/specs/issue-1/requirements.md or "
        f"docs/specs/issue-1/bugfix.md): {graph.SHORT_ARTIFACT}"
    ]


def test_implementation_needs_every_task_ticked() -> None:
    s = state(currentNode="implementation", skips={"brainstorming": {}})
    docs = ALL_DOCS
    assert blocking_node(report(s, Evidence(docs, tasks_open=0, tasks_total=4))) is None
    node = blocking_node(report(s, Evidence(docs, tasks_open=2, tasks_total=4)))
    assert node is not None and node["node"] == "implementation"
    skipped = state(
        currentNode="implementation", skips={"brainstorming": {}, "tasks-breakdown": {}}
    )
    no_list = Evidence(docs - {"tasks.md"})
    assert blocking_node(report(skipped, no_list)) is None


def test_count_tasks() -> None:
    text = "# Tasks\n- [x] one\n  - [ ] two\n* [X] three\n- not a task\n[ ] nor this\n"
    assert graph.count_tasks(text) == (1, 3)


def test_human_gates_wait_for_a_recorded_decision() -> None:
    s = state(currentNode="review", decisions={"phase-selection": {"at": "t"}})
    rep = report(s, Evidence(ALL_DOCS | {"verification.md"}))
    assert statuses(rep)["review"] == "wait"
    assert blocking_node(rep) is None
    decided = state(currentNode="complete", decisions={"phase-selection": {}, "review": {}})
    done = report(decided, Evidence(ALL_DOCS | {"verification.md"}))
    assert done["ok"] and done["currentNode"] == "complete"


def test_a_ticked_approval_gate_waits_after_its_phase_and_a_decision_opens_it() -> None:
    stops = {"brainstorming": {}, "approve-tasks": {}}
    s = WorkItemState.from_dict({**REPRO_STATE, "currentNode": "approve-design", "skips": stops})
    rep = report(s, Evidence(ALL_DOCS), recompute=False)
    assert statuses(rep)["approve-design"] == "wait"
    assert statuses(rep)["approve-tasks"] == "skip"
    assert blocking_node(rep) is None  # the turn ends: a human has to act
    approved = {**s.decisions, "approve-design": {"by": "op"}}
    later = WorkItemState.from_dict(
        {**REPRO_STATE, "currentNode": "test-planning", "skips": stops, "decisions": approved}
    )
    assert statuses(report(later, Evidence(ALL_DOCS)))["approve-design"] == "pass"
    missing = report(later, Evidence(ALL_DOCS - {"testing-plan.md"}), recompute=False)
    assert blocking_node(missing) == {
        "node": "test-planning",
        "status": "block",
        "messages": ["required artifact is missing (docs/specs/issue-1/testing-plan.md)"],
    }


def test_approval_gates_follow_the_phases_they_judge() -> None:
    assert graph.APPROVAL_GATES == {"design": "approve-design", "tasks-breakdown": "approve-tasks"}
    gates = {n.name: n.approves for n in graph.NODES if n.human_gate}
    assert gates == {
        "phase-selection": "",
        "approve-design": "design",
        "approve-tasks": "tasks-breakdown",
        "review": "implementation",
    }
    for phase, gate in graph.APPROVAL_GATES.items():
        assert graph.NODE_NAMES.index(gate) == graph.NODE_NAMES.index(phase) + 1
    assert graph.approval_stops(["design", "approve-tasks", "brainstorming"]) == (
        ["brainstorming", "design"],
        ["approve-design"],
    )


def test_a_decision_that_is_not_a_record_does_not_open_a_gate() -> None:
    rep = report(state(decisions={"phase-selection": "yes"}), recompute=False)
    assert statuses(rep)["phase-selection"] == "wait"
    assert rep["ok"] is False


def test_skips_only_apply_to_skippable_nodes() -> None:
    s = state(skips={"phase-selection": {}, "design": {}, "review": {}}, decisions={})
    rep = report(s)
    assert statuses(rep)["phase-selection"] == "wait"
    assert statuses(rep)["design"] == "skip"
    assert statuses(rep)["review"] == "wait"
    assert "cannot be skipped" in rep["nodes"][0]["messages"][0]


def test_recompute_with_nothing_unmet_keeps_the_pointer() -> None:
    s = state(currentNode="tasks-breakdown", decisions={"phase-selection": {}, "review": {}})
    rep = report(s, Evidence(ALL_DOCS | {"verification.md"}))
    assert (rep["currentNode"], rep["ok"]) == ("tasks-breakdown", True)


def test_parked_is_revalidated() -> None:
    rep = report(state(parked={"node": 3, "reason": "why", "extra": "x"}))
    assert rep["parked"] == {"node": "", "reason": "why"}


# --- the gate rule on reports (R2.1, R2.3: shapes the in-process gate never produces) ------


def _nodes(**status: str) -> list[dict[str, Any]]:
    return [{"node": n, "status": status.get(n, "pass"), "messages": []} for n in graph.NODE_NAMES]


def test_a_report_without_a_usable_current_node_lets_the_turn_end() -> None:
    nodes = _nodes(design="block")
    assert blocking_node({"pointer": "design", "nodes": nodes}) is None
    assert blocking_node({"currentNode": None, "pointer": "design", "nodes": nodes}) is None
    assert blocking_node({"currentNode": "elsewhere", "pointer": "design", "nodes": nodes}) is None


def test_a_report_without_a_pointer_key_is_bounded_by_current_node() -> None:
    nodes = _nodes(design="block")
    hit = blocking_node({"currentNode": "design", "nodes": nodes})
    assert hit is not None and hit["node"] == "design"
    assert blocking_node({"currentNode": "brainstorming", "nodes": nodes}) is None


def test_an_empty_or_unknown_pointer_lets_the_turn_end() -> None:
    nodes = _nodes(**{"phase-selection": "block"})
    for pointer in ("", "nowhere", None, 7):
        assert blocking_node({"currentNode": "design", "pointer": pointer, "nodes": nodes}) is None


names = st.sampled_from(graph.NODE_NAMES)


@given(
    pointer=st.one_of(names, st.just(""), st.just("bogus")),
    present=st.frozensets(st.sampled_from(sorted(ALL_DOCS | {"verification.md", "bugfix.md"}))),
    skips=st.frozensets(names),
    decisions=st.frozensets(st.sampled_from(["phase-selection", "review"])),
    tasks_open=st.integers(0, 3),
)
def test_the_gate_asks_only_about_reached_nodes_and_misses_none(
    pointer: str,
    present: frozenset[str],
    skips: frozenset[str],
    decisions: frozenset[str],
    tasks_open: int,
) -> None:
    s = WorkItemState.from_dict(
        {
            "workItem": "issue-1",
            "currentNode": pointer,
            "skips": {k: {} for k in skips},
            "decisions": {k: {} for k in decisions},
        }
    )
    rep = report(s, Evidence(present, tasks_open=tasks_open, tasks_total=3))
    hit = blocking_node(rep)
    if pointer not in graph.NODE_NAMES:
        assert hit is None
        return
    reached = rep["nodes"][: graph.NODE_NAMES.index(pointer) + 1]
    first_unmet = next((n for n in reached if n["status"] not in graph.SATISFIED), None)
    if first_unmet is not None and first_unmet["status"] == NodeStatus.BLOCK:
        assert hit == first_unmet
    else:
        assert hit is None


# --- reading a checkout ---------------------------------------------------------------------


def test_read_evidence_sees_files_not_directories(tmp_path: Path) -> None:
    spec = tmp_path / "docs/specs/issue-1"
    (spec / "design.md").mkdir(parents=True)
    (spec / "bugfix.md").write_text(artifact("Bug"))
    (spec / "tasks.md").write_text("- [ ] a\n- [x] b\n")
    (spec / "testing-plan.md").write_text("")
    evidence = graph.read_evidence(spec)
    assert evidence == Evidence(
        frozenset({"bugfix.md", "tasks.md"}), frozenset({"testing-plan.md"}), 1, 2
    )
    assert graph.read_evidence(tmp_path / "missing") == Evidence()


def test_find_checkout_stops_at_the_repository_root(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / "docs/specs/issue-1").mkdir(parents=True)
    (outer / "docs/specs/issue-1/work-item-state.json").write_text("{}")
    inner = outer / "inner"
    (inner / ".git").mkdir(parents=True)
    (inner / "src").mkdir()
    assert graph.find_checkout([inner / "src"], "issue-1") is None
    assert graph.find_checkout([inner / "src", outer], "issue-1") == outer
    assert graph.repository_root(inner / "src") == inner


def test_importing_the_graph_stays_light() -> None:
    probe = "import json, sys, app.graph; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {m.split(".")[0] for m in json.loads(result.stdout)}
    assert not loaded & {"pydantic", "sqlalchemy", "flask", "githubkit", "yaml", "rich"}
    assert "app.config" not in json.loads(result.stdout)


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("x", False),
        ("# Design\n", False),  # a heading alone
        ("A paragraph of words, with no heading at all above it.\n", False),
        ("# Design\n\nToo few words here.\n", False),
        ("# Design\n\n- - - * * * ### ## #\n", False),  # marks are no words
        ("# Design\n\nThe parser reads one line at a time, never the whole file.\n", True),
        ("Intro\n\n## Design\nThe parser reads one line at a time, never the whole.\n", True),
        ("#Design\n\nThe parser reads one line at a time, never the whole file.\n", False),
    ],
)
def test_an_artifact_counts_with_a_heading_and_a_paragraph(text: str, counts: bool) -> None:
    assert graph.substantive(text) is counts


def test_a_one_byte_artifact_is_too_short_and_the_gate_says_what_it_needs(tmp_path: Path) -> None:
    spec = tmp_path / "docs/specs/issue-1"
    spec.mkdir(parents=True)
    (spec / "design.md").write_text("x")
    (spec / "tasks.md").write_text("# Tasks\n\nnone yet\n")
    (spec / "notes.md").write_text("x")  # not an artifact: never judged, never read
    evidence = graph.read_evidence(spec)
    assert evidence.present == {"notes.md"} and evidence.empty == {"design.md", "tasks.md"}
    node = blocking_node(report(state(currentNode="design"), evidence))
    assert node is not None and node["messages"] == [
        f"required artifact is empty or too short (docs/specs/issue-1/design.md): "
        f"{graph.SHORT_ARTIFACT}"
    ]
    assert "Markdown heading" in graph.SHORT_ARTIFACT
    tasks = graph.artifact_problems("tasks-breakdown", "issue-1", evidence, ())
    assert tasks == [
        f"required artifact is empty or too short (docs/specs/issue-1/tasks.md): "
        f"{graph.SHORT_TASKS}"
    ]
