"""Spec 004: pre-trusting the spawn directory, every guard, with a real HOME in a temp dir."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.config.operator_config import HarnessTrust, TrustScope
from app.spawner.harness.claude_trust import (
    BYPASS_SETTING,
    ONBOARDING_KEY,
    TRUST_KEY,
    TrustPlan,
    plan_trust,
    pretrust,
    update_json_file,
    with_trust,
)

FLAG = "--dangerously-skip-permissions"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    (path / "o-r-7").mkdir(parents=True)
    return path


def trust(scope: TrustScope = TrustScope.WORKSPACE_ROOT, **kw: Any) -> HarnessTrust:
    return HarnessTrust(scope=scope, **kw)


def projects(home: Path) -> dict[str, Any]:
    return json.loads((home / ".claude.json").read_text())["projects"]


def test_directory_scope_writes_both_keys_on_the_exact_spawn_directory(
    home: Path, root: Path
) -> None:
    spawn = root / "o-r-7"
    outcome = pretrust(home, spawn, root, trust(TrustScope.DIRECTORY), [])
    assert projects(home) == {str(spawn): {TRUST_KEY: True, ONBOARDING_KEY: True}}
    assert outcome.directories == [str(spawn)] and outcome.written


def test_workspace_root_scope_also_trusts_the_root(home: Path, root: Path) -> None:
    spawn = root / "o-r-7"
    outcome = pretrust(home, spawn, root, trust(), [])
    assert projects(home) == {
        str(spawn): {TRUST_KEY: True, ONBOARDING_KEY: True},
        str(root): {TRUST_KEY: True},
    }
    assert outcome.directories == [str(spawn), str(root)]
    assert outcome.warnings == []


def test_a_root_that_does_not_contain_the_spawn_directory_is_dropped(
    home: Path, root: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outcome = pretrust(home, root / "o-r-7", elsewhere, trust(), [])
    assert list(projects(home)) == [str(root / "o-r-7")]
    assert "does not contain" in outcome.warnings[0]


@pytest.mark.parametrize("which", ["/", "$HOME"])
def test_slash_and_home_as_root_degrade_to_per_directory_with_a_warning(
    home: Path, which: str
) -> None:
    spawn = home / "work" / "o-r-7"
    spawn.mkdir(parents=True)
    root = Path("/") if which == "/" else home
    outcome = pretrust(home, spawn, root, trust(), [])
    assert list(projects(home)) == [str(spawn)]
    assert which in outcome.warnings[0]


def test_paths_are_written_as_the_real_directory_claude_code_sees(
    home: Path, root: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(root)
    pretrust(home, link / "o-r-7", link, trust(), [])
    assert set(projects(home)) == {str(root / "o-r-7"), str(root)}


def test_existing_content_is_merged_never_replaced(home: Path, root: Path) -> None:
    spawn = str(root / "o-r-7")
    before = {
        "hasCompletedOnboarding": True,
        "userID": "abc",
        "projects": {spawn: {"lastCost": 0.5, TRUST_KEY: False}, "/other": {"x": 1}},
    }
    (home / ".claude.json").write_text(json.dumps(before))
    pretrust(home, root / "o-r-7", root, trust(TrustScope.DIRECTORY), [])
    after = json.loads((home / ".claude.json").read_text())
    assert after["userID"] == "abc" and after["hasCompletedOnboarding"] is True
    assert after["projects"]["/other"] == {"x": 1}
    assert after["projects"][spawn] == {"lastCost": 0.5, TRUST_KEY: True, ONBOARDING_KEY: True}


def test_nothing_is_written_when_every_key_already_holds(home: Path, root: Path) -> None:
    pretrust(home, root / "o-r-7", root, trust(), [])
    path = home / ".claude.json"
    os.utime(path, (1_000_000, 1_000_000))
    inode = path.stat().st_ino
    outcome = pretrust(home, root / "o-r-7", root, trust(), [])
    assert not outcome.written
    assert path.stat().st_mtime == 1_000_000 and path.stat().st_ino == inode
    assert outcome.directories == [str(root / "o-r-7"), str(root)]


def test_the_files_mode_is_kept_and_a_new_file_is_private(home: Path, root: Path) -> None:
    pretrust(home, root / "o-r-7", root, trust(TrustScope.DIRECTORY), [])
    assert stat.S_IMODE((home / ".claude.json").stat().st_mode) == 0o600
    (home / ".claude.json").chmod(0o640)
    pretrust(home, root / "o-r-7", root, trust(), [])
    assert stat.S_IMODE((home / ".claude.json").stat().st_mode) == 0o640


@pytest.mark.parametrize(
    "content", ["{not json", "[1, 2]", '{"projects": []}', '{"projects": {"%s": 3}}']
)
def test_an_unusable_config_is_reported_and_never_overwritten(
    home: Path, root: Path, content: str
) -> None:
    spawn = root / "o-r-7"
    text = content.replace("%s", str(spawn))
    (home / ".claude.json").write_text(text)
    outcome = pretrust(home, spawn, root, trust(), [])
    assert (home / ".claude.json").read_text() == text
    assert outcome.failures and ".claude.json" in outcome.failures[0]
    assert outcome.directories == []


def test_a_failed_write_is_reported_and_does_not_raise(home: Path, root: Path) -> None:
    (home / ".claude.json").mkdir()
    (home / ".claude").write_text("a file where a directory should be")
    outcome = pretrust(home, root / "o-r-7", root, trust(), [FLAG])
    assert len(outcome.failures) == 2
    assert not outcome.bypass_accepted


def test_trust_disabled_writes_nothing(home: Path, root: Path) -> None:
    outcome = pretrust(home, root / "o-r-7", root, trust(enabled=False), [FLAG])
    assert not (home / ".claude.json").exists() and not (home / ".claude").exists()
    assert outcome.directories == []


def test_auto_pre_accepts_the_bypass_disclaimer_only_with_the_bypass_flag(
    home: Path, root: Path
) -> None:
    settings = home / ".claude" / "settings.json"
    pretrust(home, root / "o-r-7", root, trust(), ["--verbose"])
    assert not settings.exists()
    settings.parent.mkdir()
    settings.write_text(json.dumps({"theme": "dark"}))
    outcome = pretrust(home, root / "o-r-7", root, trust(), ["--verbose", FLAG])
    assert json.loads(settings.read_text()) == {"theme": "dark", BYPASS_SETTING: True}
    assert outcome.bypass_accepted


@pytest.mark.parametrize("value", ["never", "off", "yes"])
def test_any_value_but_auto_never_pre_accepts(home: Path, root: Path, value: str) -> None:
    pretrust(home, root / "o-r-7", root, trust(accept_bypass_permissions=value), [FLAG])
    assert not (home / ".claude" / "settings.json").exists()


def test_the_pure_edit_answers_none_when_nothing_changes() -> None:
    plan = TrustPlan("/w/a", wider=("/w",))
    once = with_trust({}, plan)
    assert once is not None and with_trust(once, plan) is None


def test_the_plan_keeps_the_spawn_directory_first() -> None:
    plan = plan_trust(Path("/w/a"), Path("/w"), TrustScope.WORKSPACE_ROOT, Path("/home/x"))
    assert plan.directories == ["/w/a", "/w"]
    same = plan_trust(Path("/w"), Path("/w"), TrustScope.WORKSPACE_ROOT, Path("/home/x"))
    assert same.directories == ["/w"] and same.warnings


CONCURRENT = 8


def _trust_many(home: Path, root: Path, start: int) -> None:
    """One launch's pre-trust, as a separate process would run it."""
    pretrust(home, root / f"item-{start}", root, trust(TrustScope.DIRECTORY), [FLAG])


def test_concurrent_trusts_from_threads_keep_every_entry(home: Path, root: Path) -> None:
    barrier = threading.Barrier(CONCURRENT)

    def one(n: int) -> None:
        plan = TrustPlan(str(root / f"item-{n}"))

        def slow_edit(data: dict[str, Any]) -> dict[str, Any] | None:
            time.sleep(0.01)  # a slow disk: the others read in the meantime
            return with_trust(data, plan)

        barrier.wait()
        update_json_file(home / ".claude.json", slow_edit)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(CONCURRENT)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(projects(home)) == {str(root / f"item-{n}") for n in range(CONCURRENT)}


def test_concurrent_trusts_from_processes_keep_every_entry(home: Path, root: Path) -> None:
    for n in range(CONCURRENT):
        (root / f"item-{n}").mkdir()
    go = home.parent / "go"
    script = (
        "import sys, time, pathlib\n"
        "from tests.spawner.test_trust import _trust_many\n"
        "go = pathlib.Path(sys.argv[3])\n"
        "while not go.exists(): time.sleep(0.001)\n"
        "_trust_many(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[4]))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(home), str(root), str(go), str(n)], env=env
        )
        for n in range(CONCURRENT)
    ]
    go.touch()  # every process starts its read-modify-write at about the same moment
    assert [p.wait(timeout=60) for p in procs] == [0] * CONCURRENT
    assert set(projects(home)) == {str(root / f"item-{n}") for n in range(CONCURRENT)}
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings == {BYPASS_SETTING: True}


def test_a_session_home_is_trusted_without_following_a_link_it_planted(
    home: Path, root: Path, tmp_path: Path
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "config.json").write_text('{"primaryApiKey": "sk-host"}')
    (host / "settings.json").write_text('{"host": true}')
    (home / ".claude.json").symlink_to(host / "config.json")
    (home / ".claude").symlink_to(host)
    outcome = pretrust(home, root / "o-r-7", root, trust(), [FLAG], session_home=True)
    assert outcome.failures == [] and outcome.bypass_accepted
    assert (host / "config.json").read_text() == '{"primaryApiKey": "sk-host"}'
    assert (host / "settings.json").read_text() == '{"host": true}'
    config = json.loads((home / ".claude.json").read_text())
    assert "primaryApiKey" not in config and str(root / "o-r-7") in config["projects"]
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings == {BYPASS_SETTING: True}


def test_the_operators_own_linked_config_is_still_written_through(
    home: Path, root: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "claude.json").write_text("{}")
    (home / ".claude.json").symlink_to(dotfiles / "claude.json")
    pretrust(home, root / "o-r-7", root, trust(TrustScope.DIRECTORY), [])
    assert (home / ".claude.json").is_symlink()
    assert str(root / "o-r-7") in json.loads((dotfiles / "claude.json").read_text())["projects"]
