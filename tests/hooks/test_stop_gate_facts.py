"""Where the stop gate takes its facts from: a sandboxed session's hook line names the
spawner's read-only facts file, and then nothing the session sets in its environment (as
Claude Code does with any settings file's `env`) moves the gate. The pure reading, then the
real hook as Claude Code runs it."""

from __future__ import annotations

import json
from pathlib import Path

from hooks.stop_gate import FACTS_AT, facts_path, gate_env
from tests.stopgate_support import DESIGN_MISSING, at, gate, make_checkout

HOSTILE = {
    "THE_LOOP_WORK_ITEM": "",
    "THE_LOOP_URL": "http://127.0.0.1:1",
    "THE_LOOP_GATE_MAX_ATTEMPTS": "1",
    "THE_LOOP_WORK_ITEM_ID": "github:o/r#999",
    "CLAUDE_PROJECT_DIR": "/tmp/elsewhere",
    "THE_LOOP_SESSION_TOKEN": "tlss_own",
    "PATH": "/usr/bin",
}


def test_the_file_wins_over_the_environment_for_every_fact() -> None:
    facts = {
        "THE_LOOP_WORK_ITEM": "issue-1",
        "THE_LOOP_URL": "http://app.example",
        "THE_LOOP_GATE_MAX_ATTEMPTS": "5",
        "THE_LOOP_WORK_ITEM_ID": "github:o/r#1",
        "CLAUDE_PROJECT_DIR": "/work/o-r-1",
    }
    env, broken = gate_env(HOSTILE, json.dumps(facts))
    assert broken == ""
    assert env == {**facts, "THE_LOOP_SESSION_TOKEN": "tlss_own", "PATH": "/usr/bin"}


def test_a_fact_the_file_leaves_out_is_not_taken_from_the_environment() -> None:
    """A standing session's file names no work item: the gate is off, whatever env says."""
    env, broken = gate_env({**HOSTILE, "THE_LOOP_WORK_ITEM": "issue-1"}, '{"X": "y"}')
    assert broken == "" and "THE_LOOP_WORK_ITEM" not in env and "THE_LOOP_URL" not in env
    assert "X" not in env  # only the gate's own keys are read from the file


def test_a_fact_that_is_not_a_string_is_left_out() -> None:
    env, _ = gate_env({}, json.dumps({"THE_LOOP_WORK_ITEM": 7, "THE_LOOP_URL": "u"}))
    assert env == {"THE_LOOP_URL": "u"}


def test_an_unreadable_or_malformed_file_is_named_broken() -> None:
    assert gate_env(HOSTILE, None)[1] == "its facts file cannot be read"
    assert gate_env(HOSTILE, "{")[1] == "its facts file is not JSON"
    assert gate_env(HOSTILE, "[1]")[1] == "its facts file is not a JSON object"


def test_only_a_hook_line_with_the_flag_reads_a_file() -> None:
    assert facts_path([]) is None and facts_path(["claude"]) is None
    assert facts_path(["--facts", "/x/gate.json"]) == "/x/gate.json"
    assert facts_path(["--facts"]) == FACTS_AT


def _facts(tmp_path: Path, checkout: Path, **facts: str) -> tuple[str, ...]:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({"CLAUDE_PROJECT_DIR": str(checkout), **facts}))
    return ("--facts", str(path))


def test_a_missing_facts_file_blocks_the_turn(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"), design_md="# design\n")
    missing = ("--facts", str(tmp_path / "nowhere.json"))
    result = gate(tmp_path, checkout, item="", args=missing)
    assert result.returncode == 2
    assert "nowhere.json: its facts file cannot be read" in result.stderr


def test_the_environment_cannot_switch_a_filed_gate_off(tmp_path: Path) -> None:
    """The file names the item, no App is reachable at the environment's URL either way, and
    the session's own token is blanked: the turn is blocked, not free."""
    checkout = make_checkout(tmp_path / "repo", at("design"))
    filed = {"THE_LOOP_URL": "http://127.0.0.1:1", "THE_LOOP_WORK_ITEM_ID": "github:o/r#1"}
    args = _facts(tmp_path, checkout, THE_LOOP_WORK_ITEM="issue-1", **filed)
    hostile = {k: v for k, v in HOSTILE.items() if k not in ("PATH", "THE_LOOP_WORK_ITEM")}
    hostile["THE_LOOP_SESSION_TOKEN"] = ""
    result = gate(tmp_path, checkout, item="", args=args, **hostile)
    assert result.returncode == 2
    assert DESIGN_MISSING in result.stderr and "(attempt 1/3)" in result.stderr
    assert "the App could not count this attempt (no App URL" in result.stderr
    assert not (tmp_path / "state" / "stop-gate").exists()  # no count file in its reach


def test_a_file_without_a_work_item_is_no_gate(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    result = gate(tmp_path, checkout, item="issue-1", args=_facts(tmp_path, checkout))
    assert result.returncode == 0 and result.stderr == ""
