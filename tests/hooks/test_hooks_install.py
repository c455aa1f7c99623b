"""`the-loop hooks install|uninstall`: merging into Claude Code's settings, safely."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from hooks.gate_entry import (
    GATE_COMMAND,
    direct_command,
    install_stop_hook,
    is_gate_entry,
    uninstall_stop_hook,
)
from tests.stopgate_support import REPRO_STATE, at, make_checkout

ROOT = Path(__file__).resolve().parents[2]
OURS = {"type": "command", "command": direct_command(), "timeout": 30}
THEIRS = {"type": "command", "command": "~/bin/notify-done", "timeout": 5}


@pytest.fixture
def hooks_cli(capsys: pytest.CaptureFixture[str]) -> Any:
    def invoke(*argv: str) -> tuple[int, str, str]:
        code = main(["hooks", *argv])
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def stop_entries(settings: dict[str, Any]) -> list[Any]:
    return [e for g in settings["hooks"]["Stop"] for e in g["hooks"]]


def test_install_creates_the_settings_file(tmp_path: Path, hooks_cli: Any) -> None:
    path = tmp_path / ".claude" / "settings.json"
    code, out, _ = hooks_cli("install", "--settings", str(path))
    assert code == 0 and "installed" in out
    assert json.loads(path.read_text()) == {"hooks": {"Stop": [{"hooks": [OURS]}]}}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_install_twice_changes_nothing(tmp_path: Path, hooks_cli: Any) -> None:
    path = tmp_path / "settings.json"
    hooks_cli("install", "--settings", str(path))
    before = path.read_bytes()
    code, out, _ = hooks_cli("install", "--settings", str(path))
    assert code == 0 and "already installed" in out
    assert path.read_bytes() == before
    assert stop_entries(json.loads(before)) == [OURS]


def test_install_keeps_everything_else(tmp_path: Path, hooks_cli: Any) -> None:
    path = tmp_path / "settings.json"
    existing: dict[str, Any] = {
        "model": "opus",
        "permissions": {"allow": ["Bash(git status)"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [THEIRS]}],
            "Stop": [{"hooks": [THEIRS]}],
        },
        "env": {"FOO": "1"},
    }
    path.write_text(json.dumps(existing))
    path.chmod(0o640)
    assert hooks_cli("install", "--settings", str(path))[0] == 0
    settings = json.loads(path.read_text())
    assert list(settings) == ["model", "permissions", "hooks", "env"]
    assert settings["hooks"]["PreToolUse"] == existing["hooks"]["PreToolUse"]
    assert stop_entries(settings) == [THEIRS, OURS]
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_install_replaces_an_older_gate_line(tmp_path: Path, hooks_cli: Any) -> None:
    path = tmp_path / "settings.json"
    old = {"type": "command", "command": "python3 /opt/loop/hooks/the-loop-gate.py claude"}
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [old, THEIRS]}, {"hooks": [old]}]}}))
    hooks_cli("install", "--settings", str(path))
    assert stop_entries(json.loads(path.read_text())) == [THEIRS, OURS]


@pytest.mark.parametrize(
    "text",
    ['{"hooks": {"Stop": [', "[1, 2]", '{"hooks": []}', '{"hooks": {"Stop": {}}}'],
    ids=["unparseable", "not-object", "hooks-not-object", "stop-not-list"],
)
def test_a_settings_file_it_cannot_read_safely_is_left_alone(
    tmp_path: Path, hooks_cli: Any, text: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(text)
    for action in ("install", "uninstall"):
        code, out, err = hooks_cli(action, "--settings", str(path))
        assert code == 2 and "not changing" in err and out == ""
        assert path.read_text() == text
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]


def test_install_through_a_symlink_updates_the_target(tmp_path: Path, hooks_cli: Any) -> None:
    target = tmp_path / "dotfiles" / "claude-settings.json"
    target.parent.mkdir()
    target.write_text('{"model": "sonnet"}')
    link = tmp_path / "settings.json"
    link.symlink_to(target)
    hooks_cli("install", "--settings", str(link))
    assert link.is_symlink()
    assert json.loads(target.read_text())["model"] == "sonnet"
    assert stop_entries(json.loads(target.read_text())) == [OURS]


def test_uninstall_removes_only_the_gate(tmp_path: Path, hooks_cli: Any) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"model": "opus", "hooks": {"Stop": [{"hooks": [THEIRS]}]}}))
    hooks_cli("install", "--settings", str(path))
    code, out, _ = hooks_cli("uninstall", "--settings", str(path))
    assert code == 0 and "removed 1" in out
    assert json.loads(path.read_text()) == {
        "model": "opus",
        "hooks": {"Stop": [{"hooks": [THEIRS]}]},
    }
    code, out, _ = hooks_cli("uninstall", "--settings", str(path))
    assert code == 0 and "nothing to remove" in out


def test_uninstall_drops_the_keys_it_emptied() -> None:
    installed, _ = install_stop_hook({"theme": "dark"}, GATE_COMMAND)
    cleared, removed = uninstall_stop_hook(installed)
    assert (cleared, removed) == ({"theme": "dark"}, 1)


def test_gate_entries_are_recognised_by_name_only() -> None:
    assert is_gate_entry({"command": "/usr/local/bin/the-loop-gate"})
    assert is_gate_entry({"command": "python -m hooks.stop_gate"})
    assert not is_gate_entry({"command": "echo the-loop-gate-like"})
    assert not is_gate_entry({"command": 3})
    assert not is_gate_entry("the-loop-gate")


def test_installed_command_runs_the_gate_where_it_is_on_path(tmp_path: Path) -> None:
    """Install into $HOME/.claude via the real CLI, then run the hook line through a shell,
    as Claude Code does, with a `the-loop-gate` launcher on PATH."""
    home = tmp_path / "home"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "the-loop-gate"
    launcher.write_text(
        f"#!{sys.executable}\nimport sys\nfrom hooks.stop_gate import main\nsys.exit(main())\n"
    )
    launcher.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
        "HOME": str(home),
        "THE_LOOP_STATE_DIR": str(tmp_path / "state"),
    }
    install = subprocess.run(
        [sys.executable, "-m", "app.cli", "hooks", "install", "--command", "the-loop-gate"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "warning" not in install.stdout and "(command: the-loop-gate)" in install.stdout
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    (command,) = [e["command"] for e in stop_entries(settings)]

    def hook(checkout: Path) -> subprocess.CompletedProcess[str]:
        payload = json.dumps({"session_id": "s", "cwd": str(checkout), "stop_hook_active": False})
        return subprocess.run(
            ["sh", "-c", command],
            input=payload,
            cwd=checkout,
            env={**env, "THE_LOOP_WORK_ITEM": "issue-1"},
            capture_output=True,
            text=True,
        )

    assert hook(make_checkout(tmp_path / "parked", REPRO_STATE)).returncode == 0
    blocked = hook(make_checkout(tmp_path / "at-design", at("design")))
    assert blocked.returncode == 2 and "design.md" in blocked.stderr


def test_the_default_line_runs_without_path_or_site(tmp_path: Path, hooks_cli: Any) -> None:
    path = tmp_path / "settings.json"
    code, out, _ = hooks_cli("install", "--settings", str(path))
    assert code == 0 and "warning" not in out
    (command,) = [e["command"] for e in stop_entries(json.loads(path.read_text()))]
    assert command == f"{sys.executable} -S {ROOT / 'hooks' / 'stop_gate.py'}"
    assert hooks_cli("install", "--settings", str(path), "--command", GATE_COMMAND)[0] == 0
    assert [e["command"] for e in stop_entries(json.loads(path.read_text()))] == [GATE_COMMAND]
    checkout = make_checkout(tmp_path / "repo", at("design"))
    blocked = subprocess.run(
        ["sh", "-c", command],
        input=json.dumps({"cwd": str(checkout)}),
        cwd=checkout,
        env={"PATH": "/usr/bin:/bin", "THE_LOOP_WORK_ITEM": "issue-1", "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert blocked.returncode == 2 and "design.md" in blocked.stderr


def test_claude_config_dir_moves_the_default(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path / "home"),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "cc"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "hooks", "install", "--command", "/opt/x/the-loop-gate"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0
    assert "warning: /opt/x/the-loop-gate is not on PATH" in result.stdout
    written = json.loads((tmp_path / "cc" / "settings.json").read_text())
    assert stop_entries(written)[0]["command"] == "/opt/x/the-loop-gate"
    assert not (tmp_path / "home" / ".claude").exists()
