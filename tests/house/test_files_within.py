"""Writing in a tree a session can write: below the trusted root, no link is followed, for
a file, a directory on the way, a read, or the mode a new file gets."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from app.files import read_within, update_within, write_within


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A directory of the host's that a planted link points at, with a file in it."""
    path = tmp_path / "host"
    path.mkdir()
    (path / "secret.json").write_text('{"host": true}')
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    path = tmp_path / "tree"
    path.mkdir()
    return path


def test_a_linked_file_is_replaced_and_its_target_is_unchanged(tree: Path, host: Path) -> None:
    (tree / "config.json").symlink_to(host / "secret.json")
    write_within(tree, "config.json", "mine", 0o600)
    assert (host / "secret.json").read_text() == '{"host": true}'
    assert not (tree / "config.json").is_symlink()
    assert (tree / "config.json").read_text() == "mine"
    assert stat.S_IMODE((tree / "config.json").stat().st_mode) == 0o600


def test_a_link_to_a_file_that_does_not_exist_yet_creates_nothing_there(
    tree: Path, host: Path
) -> None:
    (tree / ".credentials.json").symlink_to(host / "planted.json")
    write_within(tree, ".credentials.json", "token", 0o600)
    assert not (host / "planted.json").exists()
    assert (tree / ".credentials.json").read_text() == "token"


def test_a_linked_directory_on_the_way_is_replaced_by_a_real_one(tree: Path, host: Path) -> None:
    (tree / ".claude").symlink_to(host)
    write_within(tree, ".claude/secret.json", "session's own")
    assert (host / "secret.json").read_text() == '{"host": true}'
    assert sorted(p.name for p in host.iterdir()) == ["secret.json"]
    assert (tree / ".claude").is_dir() and not (tree / ".claude").is_symlink()
    assert (tree / ".claude" / "secret.json").read_text() == "session's own"


def test_a_deep_path_is_made_with_the_directory_mode(tree: Path) -> None:
    write_within(tree, "docs/specs/issue-7/state.json", "{}", 0o644, dir_mode=0o755)
    assert (tree / "docs/specs/issue-7/state.json").read_text() == "{}"
    assert stat.S_IMODE((tree / "docs/specs").stat().st_mode) == 0o755


def test_reading_through_a_link_reads_nothing(tree: Path, host: Path) -> None:
    (tree / "file.json").symlink_to(host / "secret.json")
    (tree / "dir").symlink_to(host)
    os.mkfifo(tree / "fifo")  # opening it for reading would block a naive reader
    for name in ("file.json", "dir/secret.json", "fifo", "missing"):
        with pytest.raises(FileNotFoundError):
            read_within(tree, name)
    (tree / "real.json").write_text("ok")
    assert read_within(tree, "real.json") == "ok"


def test_update_never_merges_what_a_link_points_at(tree: Path, host: Path) -> None:
    (tree / "config.json").symlink_to(host / "secret.json")
    seen: list[str] = []

    def edit(text: str) -> str:
        seen.append(text)
        return text + "+"

    assert update_within(tree, "config.json", edit, 0o600)
    assert seen == [""] and (tree / "config.json").read_text() == "+"
    assert (host / "secret.json").read_text() == '{"host": true}'


def test_update_keeps_the_mode_and_skips_an_unchanged_file(tree: Path) -> None:
    (tree / "a.json").write_text("x")
    (tree / "a.json").chmod(0o640)
    assert not update_within(tree, "a.json", lambda text: None)
    assert update_within(tree, "a.json", lambda text: text + "y")
    assert (tree / "a.json").read_text() == "xy"
    assert stat.S_IMODE((tree / "a.json").stat().st_mode) == 0o640


def test_concurrent_updates_lose_nothing(tree: Path) -> None:
    (tree / "n").write_text("")

    def add() -> None:
        for _ in range(20):
            update_within(tree, "n", lambda text: text + "1")

    threads = [threading.Thread(target=add) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (tree / "n").read_text() == "1" * 80
    assert sorted(p.name for p in tree.iterdir()) == ["n"]  # no temporary file left


@pytest.mark.parametrize("bad", ["../escape", "/abs", "a/../../b", ""])
def test_a_path_that_leaves_the_root_is_refused(tree: Path, bad: str) -> None:
    with pytest.raises(ValueError):
        write_within(tree, bad, "x")


def test_a_file_where_a_directory_is_needed_is_an_error(tree: Path) -> None:
    (tree / "docs").write_text("a file")
    with pytest.raises(NotADirectoryError):
        write_within(tree, "docs/state.json", "x")
    assert (tree / "docs").read_text() == "a file"
