"""`the-loop check`: both positions, both formats, exit codes, item resolution (spec 003 R3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from tests.stopgate_support import DESIGN_MISSING, REPRO_STATE, at, make_checkout

ROOT = Path(__file__).resolve().parents[2]
KEYS = {"workItem", "currentNode", "pointer", "ok", "parked", "nodes", "statePath", "stateFound"}


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `the-loop …` in-process in a directory; returns (exit code, stdout, stderr)."""
    monkeypatch.delenv("THE_LOOP_WORK_ITEM", raising=False)

    def invoke(where: Path, *argv: str) -> tuple[int, str, str]:
        monkeypatch.chdir(where)
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse usage errors
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def test_reproduction_through_the_real_command_line(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path / "repo", REPRO_STATE)
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "app.cli", "check", "issue-1", *argv]
        return subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)

    plain, derived = cli(), cli("--recompute")
    assert plain.returncode == 0
    assert plain.stdout.splitlines()[0] == "issue-1: ok (at phase-selection)"
    assert derived.returncode == 1
    assert derived.stdout.splitlines()[:2] == [
        "issue-1: UNMET (at design)",
        "  state: docs/specs/issue-1/work-item-state.json (pointer: phase-selection)",
    ]
    assert f"         · {DESIGN_MISSING}" in derived.stdout.splitlines()


def test_json_carries_both_positions_in_both_modes(tmp_path: Path, run: Any) -> None:
    checkout = make_checkout(tmp_path / "repo", REPRO_STATE)
    code, out, _ = run(checkout, "check", "issue-1", "--format", "json")
    plain = json.loads(out)
    assert code == 0 and set(plain) == KEYS
    assert (plain["currentNode"], plain["pointer"], plain["ok"]) == (
        "phase-selection",
        "phase-selection",
        True,
    )
    code, out, _ = run(checkout, "check", "issue-1", "--format", "json", "--recompute")
    derived = json.loads(out)
    assert code == 1 and set(derived) == KEYS
    assert (derived["currentNode"], derived["pointer"], derived["ok"]) == (
        "design",
        "phase-selection",
        False,
    )
    assert derived["statePath"] == str(checkout / "docs/specs/issue-1/work-item-state.json")
    assert derived["stateFound"] is True
    design = next(n for n in derived["nodes"] if n["node"] == "design")
    assert design == {"node": "design", "status": "block", "messages": [DESIGN_MISSING]}


def test_the_table_names_the_pointer_only_when_it_differs(tmp_path: Path, run: Any) -> None:
    checkout = make_checkout(tmp_path / "repo", at("design"))
    code, out, _ = run(checkout, "check", "issue-1", "--recompute")
    assert code == 1
    assert out.splitlines()[:2] == [
        "issue-1: UNMET (at design)",
        "  state: docs/specs/issue-1/work-item-state.json",
    ]
    code, out, _ = run(checkout, "check", "issue-1")
    assert code == 1 and out.splitlines()[0] == "issue-1: UNMET (at design)"
    assert DESIGN_MISSING in out


def test_no_state_file_is_an_unknown_position(tmp_path: Path, run: Any) -> None:
    checkout = make_checkout(tmp_path / "repo")
    code, out, _ = run(checkout, "check", "issue-1", "--format", "json")
    rep = json.loads(out)
    assert code == 1 and set(rep) == KEYS
    assert (rep["currentNode"], rep["pointer"], rep["stateFound"], rep["ok"]) == (
        None,
        "",
        False,
        False,
    )
    code, out, _ = run(checkout, "check", "issue-1")
    assert out.splitlines()[:2] == [
        "issue-1: UNMET (position unknown)",
        "  state: none found (docs/specs/issue-1/work-item-state.json)",
    ]
    code, out, _ = run(checkout, "check", "issue-1", "--recompute", "--format", "json")
    assert json.loads(out)["currentNode"] == "phase-selection"


def test_agent_written_text_cannot_drive_the_terminal(tmp_path: Path, run: Any) -> None:
    forged = at("\x1b[2Jdesign", parked={"node": "x", "reason": "\x1b]0;owned\x07"})
    checkout = make_checkout(tmp_path / "repo", forged)
    code, out, _ = run(checkout, "check", "issue-1", "--recompute")
    assert code == 1 and "\x1b" not in out and "\x07" not in out
    assert "names no node" in out.splitlines()[1]


def test_the_item_comes_from_the_environment_and_any_subdirectory(
    tmp_path: Path, run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkout = make_checkout(tmp_path / "repo", REPRO_STATE)
    sub = checkout / "src"
    sub.mkdir()
    monkeypatch.setenv("THE_LOOP_WORK_ITEM", "issue-1")
    code, out, _ = run(sub, "check")
    assert code == 0 and out.startswith("issue-1: ok (at phase-selection)")
    code, out, _ = run(tmp_path, "check", "--checkout", str(sub), "--format", "json")
    assert code == 0 and json.loads(out)["stateFound"] is True


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ((), "name a work item"),
        (("../../etc",), "is not a work item name"),
        (("issue-1", "--format", "yaml"), "invalid choice"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, run: Any, argv: tuple[str, ...], needle: str) -> None:
    code, out, err = run(tmp_path, "check", *argv)
    assert code == 2 and needle in err and out == ""
