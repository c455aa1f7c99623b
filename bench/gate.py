#!/usr/bin/env python3
"""Whole-process wall time of the stop gate, measured with hyperfine.

Sets up a git checkout holding spec 003's reproduction state (parked at phase-selection,
earlier phases skipped, design.md missing) and times the gate with Claude Code's Stop hook
JSON on stdin, two ways: the line `the-loop hooks install` writes by default (this Python
with -S on the gate's file) and a `the-loop-gate` launcher shaped like the console script
pip writes. Compiled bytecode is cached under a temporary prefix, as in an installed
package. Python's own start-up is timed alongside as the floor.

Prints each case's median and compares the two reproduction cases with the 0.1 s target.
Usage: bench/gate.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.100
REPRO_STATE = {
    "workItem": "issue-1",
    "currentNode": "phase-selection",
    "decisions": {"phase-selection": {"at": "2026-09-25T00:00:00Z"}},
    "parked": {"node": "phase-selection", "reason": "awaiting a human"},
    "skips": {
        "brainstorming": {"by": "op"},
        "requirements-definition": {"by": "op"},
        "requirements-approval": {"by": "op"},
    },
}


def make_checkout(base: Path, name: str, pointer: str) -> Path:
    checkout = base / name
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    spec = checkout / "docs" / "specs" / "issue-1"
    spec.mkdir(parents=True)
    state = {**REPRO_STATE, "currentNode": pointer}
    (spec / "work-item-state.json").write_text(json.dumps(state, indent=2) + "\n")
    (base / f"{name}.json").write_text(
        json.dumps({"session_id": "bench", "cwd": str(checkout), "stop_hook_active": False})
    )
    return checkout


def make_launcher(base: Path) -> Path:
    launcher = base / "bin" / "the-loop-gate"
    launcher.parent.mkdir()
    launcher.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "from hooks.stop_gate import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    )
    launcher.chmod(0o755)
    return launcher


def hyperfine(commands: dict[str, str], runs: int, out: Path, env: dict[str, str]) -> dict:
    argv = ["hyperfine", "--style", "basic", "-i", "-w", "5", "-r", str(runs)]
    argv += ["--export-json", str(out)]
    for label, command in commands.items():
        argv += ["-n", label, command]
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    return {r["command"]: r for r in json.loads(out.read_text())["results"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    if not shutil.which("hyperfine"):
        print("bench/gate.py: hyperfine is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        base = Path(tmp)
        repro = make_checkout(base, "repro", "phase-selection")
        make_checkout(base, "blocking", "design")
        launcher = make_launcher(base)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(
            PYTHONPATH=str(ROOT),
            PYTHONPYCACHEPREFIX=str(base / "pycache"),
            THE_LOOP_STATE_DIR=str(base / "state"),
            THE_LOOP_GATE_MAX_ATTEMPTS="1000000",
        )
        env.pop("THE_LOOP_WORK_ITEM", None)
        check = subprocess.run(
            [str(launcher)],
            input=(base / "repro.json").read_text(),
            env={**env, "THE_LOOP_WORK_ITEM": "issue-1"},
            cwd=repro,
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            print(f"bench/gate.py: the gate blocked the reproduction state:\n{check.stderr}")
            return 1
        item = "THE_LOOP_WORK_ITEM=issue-1"
        direct = f"{sys.executable} -S {ROOT / 'hooks' / 'stop_gate.py'}"
        repro_in, blocking_in = base / "repro.json", base / "blocking.json"
        commands = {
            "hook line (default install), spec 003 repro": f"{item} {direct} < {repro_in}",
            "the-loop-gate console script, spec 003 repro": f"{item} {launcher} < {repro_in}",
            "hook line, pointer at design (blocks, exit 2)": f"{item} {direct} < {blocking_in}",
            "hook line, outside a work-item session": f"{direct} < {repro_in}",
            "floor: python -c pass (with site)": f"{sys.executable} -c pass",
            "floor: python -S -c pass": f"{sys.executable} -S -c pass",
        }
        results = hyperfine(commands, args.runs, base / "hyperfine.json", env)
    print(f"stop gate whole-process wall time, {args.runs} runs each (hyperfine)")
    print(f"  {'case':<52} {'median':>9} {'min':>9} {'max':>9} {'cpu':>9}")
    for label, r in results.items():
        cpu = r["user"] + r["system"]
        figures = [r["median"], r["min"], r["max"], cpu]
        print(f"  {label:<52}" + "".join(f" {f * 1000:6.1f} ms" for f in figures))
    load = os.getloadavg()[0]
    print(f"  (cpu = mean user+system per run; load average at the end {load:.2f})")
    for label in list(results)[:2]:
        median = results[label]["median"]
        verdict = "within" if median <= TARGET else "OVER"
        print(
            f"{label}: median {median * 1000:.1f} ms, {verdict} the {TARGET * 1000:.0f} ms target"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
