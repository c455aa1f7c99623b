"""A sandboxed session's own home: what it takes from the operator's, and what it leaves: no
credential of the operator's unless a login is shared, and only its own pass approved."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from app.spawner.harness.claude_home import (
    managed_settings,
    seed_home,
    session_config,
    session_settings,
    with_approved_key,
    write_managed,
)
from hooks.gate_entry import direct_command, managed_command

PASS = "sk-ant-api03-" + "p" * 43 + "-tlgw"


def real_home(tmp_path: Path) -> Path:
    home = tmp_path / "real"
    (home / ".claude").mkdir(parents=True)
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "hasCompletedOnboarding": True,
                "primaryApiKey": "sk-ant-api03-operator-primary-key",
                "oauthAccount": {"emailAddress": "dev@example.com"},
                "customApiKeyResponses": {"approved": ["abc"], "rejected": []},
                "projects": {"/work/other-item": {"hasTrustDialogAccepted": True}},
                "tipsHistory": {"x": 1},
            }
        )
    )
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "theme": "dark",
                "apiKeyHelper": "cat ~/.key",
                "env": {
                    "ANTHROPIC_API_KEY": "sk-real",
                    "ANTHROPIC_BASE_URL": "https://elsewhere",
                    "FOO": "1",
                },
            }
        )
    )
    (home / ".claude" / ".credentials.json").write_text('{"claudeAiOauth": {}}')
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Dev One\n\temail = dev@example.com\n[credential]\n\thelper = store\n"
    )
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519").write_text("private")
    return home


def test_the_session_home_holds_only_what_claude_code_needs(tmp_path: Path) -> None:
    home = tmp_path / "session"
    assert seed_home(real_home(tmp_path), home, {}, api_key=PASS) == []
    config = json.loads((home / ".claude.json").read_text())
    assert config == {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [PASS[-20:]], "rejected": []},
    }
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    assert settings == {"theme": "dark"}  # no `env`, no `apiKeyHelper`: an allow-list
    assert "hooks" not in settings  # the stop gate is in the managed settings, not here
    assert (home / ".gitconfig").read_text() == (
        "[user]\n\tname = Dev One\n\temail = dev@example.com\n"
    )
    assert sorted(p.name for p in home.iterdir()) == [".claude", ".claude.json", ".gitconfig"]
    assert sorted(p.name for p in (home / ".claude").iterdir()) == ["settings.json"]
    assert stat.S_IMODE(home.stat().st_mode) == 0o700


def test_a_shared_login_is_copied_in_and_removed_once_no_longer_shared(tmp_path: Path) -> None:
    real, home = real_home(tmp_path), tmp_path / "session"
    assert seed_home(real, home, {}, api_key=PASS, share_login=True) == []
    login = home / ".claude" / ".credentials.json"
    assert login.read_text() == '{"claudeAiOauth": {}}'
    assert stat.S_IMODE(login.stat().st_mode) == 0o600
    config = json.loads((home / ".claude.json").read_text())
    assert config["oauthAccount"] == {"emailAddress": "dev@example.com"}
    assert "primaryApiKey" not in config
    seed_home(real, home, {}, api_key=PASS)
    assert not login.exists()
    assert "oauthAccount" not in json.loads((home / ".claude.json").read_text())


def test_keys_an_earlier_launch_left_in_the_session_home_are_taken_out(tmp_path: Path) -> None:
    home = tmp_path / "session"
    home.mkdir()
    (home / ".claude.json").write_text(
        json.dumps(
            {
                "primaryApiKey": "sk-ant-api03-left-behind",
                "customApiKeyResponses": {"approved": ["old-pass-tail", "abc"], "rejected": []},
                "numStartups": 3,
            }
        )
    )
    seed_home(real_home(tmp_path), home, {}, api_key=PASS)
    assert json.loads((home / ".claude.json").read_text()) == {
        "numStartups": 3,
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": [PASS[-20:]], "rejected": []},
    }


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


def test_an_unreadable_real_config_is_reported_when_a_login_is_shared(tmp_path: Path) -> None:
    real = real_home(tmp_path)
    (real / ".claude.json").write_text("{not json")
    assert seed_home(real, tmp_path / "alone", {}, api_key=PASS) == []  # nothing read from it
    failures = seed_home(real, tmp_path / "session", {}, api_key=PASS, share_login=True)
    assert len(failures) == 1 and ".claude.json" in failures[0]
    assert (real / ".claude.json").read_text() == "{not json"
    assert not (tmp_path / "session" / ".claude.json").exists()


def test_the_pure_edits() -> None:
    assert session_config({"hasCompletedOnboarding": True}, None) is None
    assert session_config({"primaryApiKey": "k"}, None) == {"hasCompletedOnboarding": True}
    approved = with_approved_key({"customApiKeyResponses": {"approved": ["mine"]}}, PASS)
    assert approved == {
        "hasCompletedOnboarding": True,
        "customApiKeyResponses": {"approved": ["mine", PASS[-20:]], "rejected": []},
    }
    assert approved is not None and with_approved_key(approved, PASS) is None
    many = approved
    for n in range(100):  # unconfined launches: only the latest passes' approvals stay
        many = with_approved_key(many, f"sk-ant-api03-{n:043d}-tlgw") or many
    kept = many["customApiKeyResponses"]["approved"]
    assert kept[0] == "mine" and len(kept) == 65
    assert kept[-1] == f"{99:043d}-tlgw"[-20:] and PASS[-20:] not in kept
    assert session_settings({"apiKeyHelper": "x", "env": {"FOO": "1"}, "model": "m"}) == {
        "model": "m"
    }
    rules = {"allow": ["Bash(ls)"], "defaultMode": "acceptEdits", "unknownLater": "x"}
    assert session_settings({"permissions": rules}) == {
        "permissions": {"allow": ["Bash(ls)"], "defaultMode": "acceptEdits"}
    }
    assert session_settings({"permissions": "not rules"}) == {}
    gate = {"hooks": [{"type": "command", "command": direct_command(), "timeout": 30}]}
    assert session_settings({"hooks": {"Stop": [gate]}}) == {}  # the managed settings run it
    host = {"permissions": {"deny": ["WebFetch"]}}
    loader = {"LD_PRELOAD": "", "LD_AUDIT": "", "LD_LIBRARY_PATH": ""}
    assert managed_settings(host, direct_command()) == {
        **host,
        "hooks": {"Stop": [gate]},
        "disableAllHooks": False,
        "allowManagedHooksOnly": True,
        "env": {**loader, "CLAUDE_CODE_SIMPLE": "0"},
    }
    # The host's own policy cannot switch the gate off either.
    off = {"disableAllHooks": True, "env": {"CLAUDE_CODE_SIMPLE": "1"}}
    pinned = managed_settings(off, direct_command())
    assert pinned["disableAllHooks"] is False and pinned["env"]["CLAUDE_CODE_SIMPLE"] == "0"


def test_links_a_session_planted_in_its_home_are_replaced_not_written_through(
    tmp_path: Path,
) -> None:
    real, home = real_home(tmp_path), tmp_path / "session"
    seed_home(real, home, {}, share_login=True)
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
    assert seed_home(real, home, {}, share_login=True) == []
    for name in ("credentials", "settings", "config", "gitconfig"):
        assert (victims / name).read_text() == f"host {name}"
    assert (real / ".claude.json").read_text() == before
    config = json.loads((home / ".claude.json").read_text())
    assert "projects" not in config  # the link was not read: no other checkout's entry
    assert (home / ".claude" / ".credentials.json").read_text() == '{"claudeAiOauth": {}}'
    assert json.loads((home / ".claude" / "settings.json").read_text())["theme"] == "dark"
    assert not any(p.is_symlink() for p in [home / ".claude.json", *home.rglob("*")])
    (home / ".claude" / ".credentials.json").unlink()
    (home / ".claude" / ".credentials.json").symlink_to(victims / "credentials")
    assert seed_home(real, home, {}) == []  # not shared: the link goes, its target stays
    assert not (home / ".claude" / ".credentials.json").exists()
    assert (victims / "credentials").read_text() == "host credentials"


def test_a_linked_claude_directory_is_replaced_by_a_real_one(tmp_path: Path) -> None:
    real, home = real_home(tmp_path), tmp_path / "session"
    home.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (home / ".claude").symlink_to(elsewhere)
    assert seed_home(real, home, {}, share_login=True) == []
    assert list(elsewhere.iterdir()) == []
    assert (home / ".claude").is_dir() and not (home / ".claude").is_symlink()
    assert (home / ".claude" / ".credentials.json").read_text() == '{"claudeAiOauth": {}}'


def test_the_managed_settings_hold_the_gate_and_the_hosts_own_policy(tmp_path: Path) -> None:
    host = tmp_path / "etc-claude-code" / "managed-settings.json"
    state = tmp_path / "state"
    managed = write_managed(state, host)  # no managed settings on the host: the gate alone
    gate = {"type": "command", "command": managed_command(), "timeout": 30}
    loader = {"LD_PRELOAD": "", "LD_AUDIT": "", "LD_LIBRARY_PATH": ""}
    assert json.loads((managed / "managed-settings.json").read_text()) == {
        "hooks": {"Stop": [{"hooks": [gate]}]},
        "disableAllHooks": False,
        "allowManagedHooksOnly": True,
        "env": {**loader, "CLAUDE_CODE_SIMPLE": "0"},
    }
    host.parent.mkdir()
    host.write_text('{"permissions": {"deny": ["WebFetch"]}}')
    assert write_managed(state, host) == managed == state / "managed"
    written = json.loads((managed / "managed-settings.json").read_text())
    assert written["permissions"] == {"deny": ["WebFetch"]} and written["hooks"]["Stop"]
