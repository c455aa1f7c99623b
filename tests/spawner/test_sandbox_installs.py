"""A harness installed under the home, the way Claude Code's own installer and nvm do it, runs
in the real bubblewrap sandbox with no sandbox configuration: its installation is shown
read-only, and the rest of the home stays absent. `the-loop doctor` says what is shown."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from app.config.sandbox_config import Sandbox
from app.spawner.confine.isolation import confined_argv, host_plan

ROOT = Path(__file__).resolve().parents[2]
NODE = "v1.0.0"
# The stand-in interpreter, where nvm puts Node.js; the harness names it as `env node` does.
INTERPRETER = '#!/bin/sh\nexec /bin/sh "$@"\n'
HARNESS = """#!/usr/bin/env node
echo "harness ran: $*"
cat "$REAL_HOME/notes.txt" 2>/dev/null || echo "notes: absent"
cat "$REAL_HOME/.local/share/other/data.txt" 2>/dev/null || echo "other: absent"
ls "$REAL_HOME/.local/share/tool/versions"
touch "$REAL_HOME/.local/share/tool/versions/1.0/written" 2>/dev/null || echo "install: read-only"
"""


@dataclass
class Machine:
    home: Path
    env: dict[str, str]
    version_dir: Path
    node_dir: Path


def machine(tmp_path: Path) -> Machine:
    """A fresh home with a harness under ~/.local/share/tool/versions/1.0 (linked from
    ~/.local/bin, as an installer does), its `node` under ~/.nvm, and private files beside."""
    home = tmp_path / "home"
    version_dir = home / ".local/share/tool/versions/1.0"
    node_dir = home / ".nvm/versions/node" / NODE
    for folder in (version_dir / "bin", node_dir / "bin", home / ".local/bin"):
        folder.mkdir(parents=True)
    (home / ".local/share/tool/versions/0.9").mkdir()  # an older version: not shown
    (home / ".local/share/other").mkdir()
    (home / ".local/share/other/data.txt").write_text("other-data")
    (home / "notes.txt").write_text("private-notes")
    for path, text in ((node_dir / "bin/node", INTERPRETER), (version_dir / "bin/tool", HARNESS)):
        path.write_text(text)
        path.chmod(0o755)
    (home / ".local/bin/tool").symlink_to(version_dir / "bin/tool")
    path = f"{home / '.local/bin'}:{node_dir / 'bin'}:/usr/bin:/bin"
    return Machine(home, {"HOME": str(home), "PATH": path}, version_dir, node_dir)


def test_a_harness_installed_under_the_home_runs_in_the_sandbox_and_the_home_stays_hidden(
    tmp_path: Path,
) -> None:
    box = machine(tmp_path)
    checkout, session_home = tmp_path / "work" / "item", tmp_path / "state" / "homes" / "item"
    checkout.mkdir(parents=True)
    session_home.mkdir(parents=True)
    plan = host_plan(
        sandbox=Sandbox(), checkout=checkout, home=session_home, env=box.env, hidden=()
    )
    argv = confined_argv(plan, ["tool", "--model", "x"], box.env)
    assert str(box.version_dir) in argv and str(box.node_dir) in argv
    assert str(box.home) not in argv and str(box.home / ".local") not in argv
    done = subprocess.run(
        argv,
        env={**box.env, "REAL_HOME": str(box.home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "harness ran: --model x",
        "notes: absent",
        "other: absent",
        "1.0",  # the version that runs, not 0.9 beside it
        "install: read-only",
    ]
    assert not (box.version_dir / "written").exists()


def test_doctor_says_what_the_sandbox_shows_of_the_harness(tmp_path: Path) -> None:
    box = machine(tmp_path)
    config = tmp_path / "devbox.yaml"
    config.write_text("harnesses: [{name: claude, default: true, command: tool}]\n")
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "doctor", "--json"],
        cwd=ROOT,
        env={
            **box.env,
            "PATH": f"{box.env['PATH']}:{Path(sys.executable).parent}",
            "PYTHONPATH": str(ROOT),
            "THE_LOOP_CONFIG": str(config),
            "THE_LOOP_STATE_DIR": str(tmp_path / "state"),
            "THE_LOOP_URL": "http://127.0.0.1:9",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    rows = {row["check"]: row for row in map(json.loads, done.stdout.splitlines())}
    row = rows["sandbox shows claude"]
    assert row["level"] == "ok", row
    assert row["detail"] == (
        f"{box.home}/.local/bin/tool -> {box.version_dir}/bin/tool "
        f"(via {box.node_dir}/bin/node): shows {box.version_dir}, {box.node_dir} read-only"
    )
