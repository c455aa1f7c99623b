"""A sandboxed session's own home: what it takes from the operator's, and what it leaves."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from app.commands.hooks import direct_command
from app.spawner.sessionhome import carried_config, seed_home, with_carried


def real_home(tmp_path: Path) -> Path:
    home = tmp_path / "real"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "customApiKeyResponses": {"approved": ["abc"], "rejected": []},
                "projects": {"/work/other-item": {"hasTrustDialogAccepted": True}},
            }
        )
    )
    (home / ".claude" / "settings.json").write_text(json.dumps({"theme": "dark"}))
    (home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Dev One\n\temail = dev@example.com\n[credential]\n\thelper = store\n"
    )
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("private")
    return home


def test_the_session_home_holds_only_what_claude_code_needs(tmp_path: Path) -> None:
    home = tmp_path / "session"
    assert seed_home(real_home(tmp_path), home, {}) == []
    config = json.loads((home / ".claude.json").read_text())
    assert config == {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": ["abc"], "rejected": []},
    }
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings["theme"] == "dark"
    assert settings["hooks"]["Stop"] == [
        {"hooks": [{"type": "command", "command": direct_command(), "timeout": 30}]}
    ]
    assert (home / ".claude" / ".credentials.json").read_text() == '{"claudeAiOauth": {}}'
    assert (home / ".gitconfig").read_text() == (
        "[user]\n\tname = Dev One\n\temail = dev@example.com\n"
    )
    assert sorted(p.name for p in home.iterdir()) == [".claude", ".claude.json", ".gitconfig"]
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_what_claude_code_wrote_in_the_session_home_is_kept_on_the_next_launch(
    tmp_path: Path,
) -> None:
    real, home = real_home(tmp_path), tmp_path / "session"
    seed_home(real, home, {})
    written = json.loads((home / ".claude.json").read_text())
    written["projects"] = {"/work/item": {"lastCost": 0.5}}
    (home / ".claude.json").write_text(json.dumps(written))
    seed_home(real, home, {})
    assert json.loads((home / ".claude.json").read_text())["projects"] == {
        "/work/item": {"lastCost": 0.5}
    }


def test_an_unreadable_real_config_is_reported_and_nothing_is_taken_from_it(
    tmp_path: Path,
) -> None:
    real = real_home(tmp_path)
    (real / ".claude.json").write_text("{not json")
    failures = seed_home(real, tmp_path / "session", {})
    assert len(failures) == 1 and ".claude.json" in failures[0]
    assert (real / ".claude.json").read_text() == "{not json"
    assert not (tmp_path / "session" / ".claude.json").exists()


def test_the_pure_merges() -> None:
    assert carried_config({"a": 1, "projects": {"x": {}}}) == {"a": 1}
    assert with_carried({"a": 1, "b": 2}, {"a": 1}) is None
    assert with_carried({"a": 0, "b": 2}, {"a": 1}) == {"a": 1, "b": 2}


def test_links_a_session_planted_in_its_home_are_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    real, home = real_home(tmp_path), tmp_path / "session"
    seed_home(real, home, {})
    victims = tmp_path / "victims"
    victims.mkdir()
    for name in ("credentials", "settings", "config", "gitconfig"):
        (victims / name).write_text(f"host {name}")
    (home / ".claude" / ".credentials.json").unlink()
    (home / ".claude" / ".credentials.json").symlink_to(victims / "credentials")
    (home / ".claude" / "settings.json").unlink()
    (home / ".claude" / "settings.json").symlink_to(victims / "settings")
    (home / ".claude.json").unlink()
    (home / ".claude.json").symlink_to(real / ".claude.json")  # the operator's whole config
    (home / ".gitconfig").unlink()
    (home / ".gitconfig").symlink_to(victims / "gitconfig")
    before = (real / ".claude.json").read_text()
    assert seed_home(real, home, {}) == []
    for name in ("credentials", "settings", "config", "gitconfig"):
        assert (victims / name).read_text() == f"host {name}"
    assert (real / ".claude.json").read_text() == before
    config = json.loads((home / ".claude.json").read_text())
    assert "projects" not in config  # the link was not read: no other checkout's entry
    assert (home / ".claude" / ".credentials.json").read_text() == '{"claudeAiOauth": {}}'
    assert "hooks" in json.loads((home / ".claude" / "settings.json").read_text())
    assert not any(p.is_symlink() for p in [home / ".claude.json", *home.rglob("*")])


def test_a_linked_claude_directory_is_replaced_by_a_real_one(tmp_path: Path) -> None:
    real, home = real_home(tmp_path), tmp_path / "session"
    home.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / ".claude").symlink_to(elsewhere)
    assert seed_home(real, home, {}) == []
    assert list(elsewhere.iterdir()) == []
    assert (home / ".claude").is_dir() and not (home / ".claude").is_symlink()
    assert (home / ".claude" / ".credentials.json").read_text() == '{"claudeAiOauth": {}}'
