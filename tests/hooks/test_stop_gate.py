"""The stop gate run as Claude Code runs it: a subprocess, Stop hook JSON on stdin, exit code
and stderr as the answer, in real git checkouts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.stopgate_support import DESIGN_MISSING, REPRO_STATE, ROOT, at, gate, make_checkout
from tests.support import artifact

# --- spec 003, Expected vs actual ---------------------------------------------------------


def test_parked_at_phase_selection_lets_the_turn_end(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", REPRO_STATE)
    result = gate(tmp_path, checkout)
    assert (result.returncode, result.stderr, result.stdout) == (0, "", "")


def test_at_design_with_design_missing_blocks_and_names_the_file(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    result = gate(tmp_path, checkout)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "the-loop: the design step is not complete.",
        f"  · {DESIGN_MISSING}",
        "",
        "Fix the above, then finish. (attempt 1/3)",
    ]


@pytest.mark.parametrize(
    "state",
    [None, at(""), at("no-such-node"), "{not json", "[1, 2]", json.dumps({"skips": {}})],
    ids=["no-state-file", "empty-pointer", "unknown-pointer", "corrupt", "not-object", "no-key"],
)
def test_a_position_it_cannot_resolve_lets_the_turn_end(tmp_path: Path, state: Any) -> None:
    checkout = make_checkout(tmp_path / "repo", state)
    result = gate(tmp_path, checkout)
    assert (result.returncode, result.stderr) == (0, "")


# --- R1: only nodes the item has reached ---------------------------------------------------


def test_pointer_ahead_of_an_unmet_node_still_blocks_on_it(tmp_path: Path) -> None:
    checkout = make_checkout(
        tmp_path / "repo", at("tasks-breakdown"), testing_plan_md="plan", tasks_md="- [ ] a"
    )
    result = gate(tmp_path, checkout)
    assert result.returncode == 2
    assert "the design step" in result.stderr and DESIGN_MISSING in result.stderr


def test_the_state_file_cannot_declare_a_node_passed(tmp_path: Path) -> None:
    forged = at(
        "design",
        decisions={"phase-selection": {"at": "x"}, "design": {"at": "x", "by": "agent"}},
        nodes=[{"node": "design", "status": "pass"}],
        ok=True,
    )
    checkout = make_checkout(tmp_path / "repo", forged)
    result = gate(tmp_path, checkout)
    assert result.returncode == 2 and DESIGN_MISSING in result.stderr


def test_a_skip_on_a_node_that_cannot_be_skipped_is_ignored(tmp_path: Path) -> None:
    state = at("implementation", skips={**REPRO_STATE["skips"], "implementation": {"by": "x"}})
    checkout = make_checkout(
        tmp_path / "repo",
        state,
        design_md=artifact(),
        testing_plan_md=artifact("Testing plan"),
        tasks_md="- [x] one\n- [ ] two\n",
    )
    result = gate(tmp_path, checkout)
    assert result.returncode == 2
    assert "1 of 2 tasks are not ticked (docs/specs/issue-1/tasks.md)" in result.stderr


def test_a_human_gate_before_the_pointer_waits_instead_of_blocking(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design", decisions={}))
    assert gate(tmp_path, checkout).returncode == 0


def test_writing_the_artifact_lets_the_turn_end_and_clears_the_count(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    assert "(attempt 1/3)" in gate(tmp_path, checkout).stderr
    assert "(attempt 2/3)" in gate(tmp_path, checkout).stderr
    (checkout / "docs/specs/issue-1/design.md").write_text(artifact())
    assert gate(tmp_path, checkout).returncode == 0
    (checkout / "docs/specs/issue-1/design.md").write_text("")
    again = gate(tmp_path, checkout)
    assert again.returncode == 2
    assert "required artifact is empty" in again.stderr and "(attempt 1/3)" in again.stderr


# --- the attempt cap ------------------------------------------------------------------------


def test_after_three_nudges_the_turn_ends_with_a_message(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    codes = [gate(tmp_path, checkout).returncode for _ in range(3)]
    fourth = gate(tmp_path, checkout)
    assert codes == [2, 2, 2]
    assert fourth.returncode == 0
    message = json.loads(fourth.stdout)["systemMessage"]
    assert "design is still not complete after 3 attempts" in message
    assert gate(tmp_path, checkout).returncode == 0
    counts = list((tmp_path / "state" / "stop-gate" / "issue-1").iterdir())
    assert len(counts) == 1 and json.loads(counts[0].read_text())["workItem"] == "issue-1"
    assert not [p for p in checkout.rglob("*") if "stop-gate" in p.name or "attempt" in p.name]


def test_attempts_are_counted_per_checkout(tmp_path: Path) -> None:
    first = make_checkout(tmp_path / "one", at("design"))
    second = make_checkout(tmp_path / "two", at("design"))
    gate(tmp_path, first)
    gate(tmp_path, first)
    assert "(attempt 1/3)" in gate(tmp_path, second).stderr
    assert "(attempt 3/3)" in gate(tmp_path, first).stderr


def test_the_spawner_can_set_the_cap(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    assert "(attempt 1/1)" in gate(tmp_path, checkout, THE_LOOP_GATE_MAX_ATTEMPTS="1").stderr
    assert gate(tmp_path, checkout, THE_LOOP_GATE_MAX_ATTEMPTS="1").returncode == 0


@pytest.mark.parametrize("value", ["0", "-1", "three", ""])
def test_a_cap_that_is_not_a_positive_number_means_three(tmp_path: Path, value: str) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    result = gate(tmp_path, checkout, THE_LOOP_GATE_MAX_ATTEMPTS=value)
    assert "(attempt 1/3)" in result.stderr


def test_no_config_file_sets_the_cap(tmp_path: Path) -> None:
    """Only the spawner's variable does: the checkout is agent-writable, and YAML per turn
    would cost more than the rest of the gate."""
    checkout = make_checkout(tmp_path / "repo", at("design"))
    (checkout / "cli-config.yaml").write_text("stopGate:\n  maxAttempts: 1\n")
    operator = tmp_path / "operator.yaml"
    operator.write_text("stopGate:\n  maxAttempts: 1\n")
    gate(tmp_path, checkout, THE_LOOP_CONFIG=str(operator))
    assert "(attempt 2/3)" in gate(tmp_path, checkout, THE_LOOP_CONFIG=str(operator)).stderr


def test_stop_hook_active_does_not_reset_or_skip_the_count(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    gate(tmp_path, checkout)
    payload = {"session_id": "s", "cwd": str(checkout), "stop_hook_active": True}
    result = gate(tmp_path, checkout, stdin=json.dumps(payload))
    assert result.returncode == 2 and "(attempt 2/3)" in result.stderr


# --- where the gate looks, and when it is off -----------------------------------------------


def test_outside_a_work_item_session_it_exits_at_once(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    result = gate(tmp_path, checkout, item=None)
    assert (result.returncode, result.stderr) == (0, "")
    timed = subprocess.run(  # the default hook line, which skips site
        [sys.executable, "-S", "-X", "importtime", str(ROOT / "hooks" / "stop_gate.py")],
        input=json.dumps({"cwd": str(checkout)}),
        env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {line.rsplit("|", 1)[-1].strip() for line in timed.stderr.splitlines()}
    assert "os" in imported
    assert not {"json", "dataclasses", "pathlib", "typing", "hooks", "app"} & imported


def test_a_work_item_name_that_is_a_path_turns_the_gate_off(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    result = gate(tmp_path, checkout, item="../../etc")
    assert result.returncode == 0 and "is not a work item" in result.stderr


def test_the_agent_moving_elsewhere_does_not_switch_the_gate_off(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = gate(tmp_path, checkout, cwd=elsewhere, CLAUDE_PROJECT_DIR=str(checkout))
    assert result.returncode == 2


def test_from_a_subdirectory_it_finds_the_checkout(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    sub = checkout / "src" / "pkg"
    sub.mkdir(parents=True)
    assert gate(tmp_path, checkout, cwd=sub).returncode == 2


def test_unreadable_hook_input_still_evaluates_the_working_directory(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    assert gate(tmp_path, checkout, stdin="not json at all").returncode == 2


def test_run_as_a_file_without_site_it_finds_its_own_packages(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    result = subprocess.run(
        [sys.executable, "-S", str(ROOT / "hooks" / "stop_gate.py")],
        input=json.dumps({"cwd": str(checkout)}),
        cwd=tmp_path,
        env={
            "THE_LOOP_WORK_ITEM": "issue-1",
            "THE_LOOP_STATE_DIR": str(tmp_path / "s"),
            "PYTHONDONTWRITEBYTECODE": "1",
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and DESIGN_MISSING in result.stderr


def test_the_gate_imports_only_light_modules(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    probe = (
        "import json, sys, hooks.gate as g\n"
        f"out = g.run({{'cwd': {str(checkout)!r}}}, "
        f"{{'THE_LOOP_WORK_ITEM': 'issue-1', 'THE_LOOP_STATE_DIR': {str(tmp_path)!r}}})\n"
        "heavy = ('pydantic', 'sqlalchemy', 'flask', 'githubkit', 'yaml', 'httpx', 'rich')\n"
        "print(json.dumps([out.code, sorted({m.split('.')[0] for m in sys.modules} & set(heavy)),"
        " 'app.config' in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout) == [2, [], False]


def test_a_one_byte_artifact_does_not_end_the_turn_and_the_gate_says_what_it_needs(
    tmp_path: Path,
) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"), design_md="x")
    result = gate(tmp_path, checkout)
    assert result.returncode == 2
    assert "required artifact is empty or too short (docs/specs/issue-1/design.md)" in (
        result.stderr
    )
    assert "a Markdown heading" in result.stderr and "8 words" in result.stderr
