"""What an ended session left behind, read on the host as data: its transcript found without
following links, its last message, and the files changed in its checkout with git's hooks and
file-system monitor off."""

from __future__ import annotations

import json
import os
from pathlib import Path

from app.spawner.harness.claude_home import transcript_path
from app.spawner.session.leftovers import (
    MAX_MESSAGE,
    changed_files,
    last_message,
    porcelain_paths,
)
from app.spawner.workspace.hostgit import HostGit
from tests.spawner_support import bare_repository, git

SID = "0b6f3a52-1c1e-4a8e-9a53-5b8f7f1d2c3e"


def said(text: str) -> str:
    return json.dumps(
        {"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}}
    )


def test_the_last_message_is_the_last_text_the_agent_said() -> None:
    lines = [
        said("first"),
        "not json",
        said("the last words"),
        json.dumps({"type": "assistant", "message": {"content": [{"type": "tool_use"}]}}),
        json.dumps({"type": "user", "message": {"content": "a user turn"}}),
        "",
    ]
    assert last_message("\n".join(lines)) == "the last words"
    assert (
        last_message(json.dumps({"type": "assistant", "message": {"content": "plain"}})) == "plain"
    )
    assert last_message("") == ""
    long = last_message(said("x" * 10 + "y" * MAX_MESSAGE))
    assert len(long) == MAX_MESSAGE and long.startswith("…") and long.endswith("y")


def transcript_in(home: Path, folder: str = "-work-o-r-1") -> Path:
    directory = home / ".claude" / "projects" / folder
    directory.mkdir(parents=True)
    path = directory / f"{SID}.jsonl"
    path.write_text(said("hello") + "\n")
    return path


def test_a_transcript_is_found_by_its_session_id(tmp_path: Path) -> None:
    path = transcript_in(tmp_path)
    assert transcript_path(tmp_path, SID) == path
    assert transcript_path(tmp_path, "other") is None
    assert transcript_path(tmp_path, "../../etc/passwd") is None


def test_no_link_is_followed_on_the_way_to_a_transcript(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    transcript_in(elsewhere)
    linked_file = tmp_path / "a"
    (linked_file / ".claude" / "projects" / "p").mkdir(parents=True)
    os.symlink(elsewhere / ".claude/projects/-work-o-r-1" / f"{SID}.jsonl",
               linked_file / ".claude/projects/p" / f"{SID}.jsonl")  # fmt: skip
    assert transcript_path(linked_file, SID) is None
    linked_dir = tmp_path / "b"
    (linked_dir / ".claude" / "projects").mkdir(parents=True)
    os.symlink(elsewhere / ".claude/projects/-work-o-r-1", linked_dir / ".claude/projects/p")
    assert transcript_path(linked_dir, SID) is None
    linked_home = tmp_path / "c"
    (linked_home / ".claude").mkdir(parents=True)
    os.symlink(elsewhere / ".claude/projects", linked_home / ".claude/projects")
    assert transcript_path(linked_home, SID) is None


def checkout(tmp_path: Path) -> Path:
    origin = bare_repository(tmp_path)
    work = tmp_path / "checkout"
    git("clone", "-q", str(origin), str(work), cwd=tmp_path)
    git("switch", "-q", "-c", "the-loop/issue-1", cwd=work)
    (work / "src").mkdir()
    (work / "src" / "fix.py").write_text("x\n")
    git("add", "src/fix.py", cwd=work)
    git("commit", "-q", "-m", "fix", cwd=work)
    return work


def test_changed_files_name_the_branchs_commits_and_what_was_left_uncommitted(
    tmp_path: Path,
) -> None:
    work = checkout(tmp_path)
    (work / "README.md").write_text("changed\n")
    (work / "new file.txt").write_text("n\n")
    git("mv", "src/fix.py", "src/moved.py", cwd=work)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    facts = changed_files(work, HostGit(env))
    assert facts["changed_base"] == "origin/HEAD"
    assert facts["changed_files"] == ["src/fix.py"]
    assert sorted(facts["uncommitted_files"]) == ["README.md", "new file.txt", "src/moved.py"]
    assert changed_files(tmp_path / "not-a-checkout", HostGit(env)) == {
        "leftovers_unread": "the checkout's git was not read: .git is missing"
    }


def test_the_checkouts_own_git_config_runs_nothing(tmp_path: Path) -> None:
    work = checkout(tmp_path)
    ran = tmp_path / "RAN"
    monitor = tmp_path / "monitor.sh"
    monitor.write_text(f"#!/bin/sh\ntouch {ran}\n")
    monitor.chmod(0o755)
    git("config", "core.fsmonitor", str(monitor), cwd=work)  # the session could write this
    (work / "README.md").write_text("changed\n")
    facts = changed_files(work, HostGit({"PATH": os.environ["PATH"], "HOME": str(tmp_path)}))
    assert facts["uncommitted_files"] == ["README.md"]
    assert not ran.exists()


def test_porcelain_paths_leave_out_a_renames_old_path() -> None:
    out = b" M a.txt\0R  new.txt\0old.txt\0?? b c.txt\0"
    assert porcelain_paths(out) == [b"a.txt", b"new.txt", b"b c.txt"]
