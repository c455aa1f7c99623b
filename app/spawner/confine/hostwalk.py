"""Walking what a session wrote, from the host: its checkout and its home, to make them safe
for the host's next step (`tidy`) or to measure what they hold on disk (`measure`).

A session writes its tree while the host looks, and anything in it may be a link. So the
walk never follows one: each directory is opened relative to its parent's descriptor with
`O_NOFOLLOW`, each entry is looked at with `lstat`, and a file is changed only through a
descriptor opened the same way and seen to be the entry looked at. The walk is bounded in
depth and in entries: past either it stops and says so (`Walked.complete` is False), so a
tree made to be endless costs a bounded time.

`tidy` takes from every entry what would let a host user gain the session's user (a
set-uid or set-gid bit) or write where the host reads (a world-writable directory), and
hands the tree to the session's user (`owner`) when sessions run as one.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 256
MAX_ENTRIES = 2_000_000
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
DANGEROUS_BITS = stat.S_ISUID | stat.S_ISGID


@dataclass
class Walked:
    """What one walk saw and did."""

    entries: int = 0
    bytes: int = 0  # allocated on disk (blocks), links and all, each inode once per walk
    cleared: list[str] = field(default_factory=list)  # relative paths whose mode was made safe
    complete: bool = True
    _seen: set[tuple[int, int]] = field(default_factory=set, repr=False)


def safe_mode(mode: int) -> int:
    """`mode` without set-uid/set-gid bits and, for a directory, without write for others
    (pure)."""
    kept = stat.S_IMODE(mode) & ~DANGEROUS_BITS
    if stat.S_ISDIR(mode):
        kept &= ~stat.S_IWOTH
    return kept


def _needs_change(st: os.stat_result, owner: tuple[int, int] | None) -> bool:
    unsafe = safe_mode(st.st_mode) != stat.S_IMODE(st.st_mode)
    return unsafe or (owner is not None and (st.st_uid, st.st_gid) != owner)


def _fix(fd: int, st: os.stat_result, owner: tuple[int, int] | None) -> None:
    """Make the open `fd` (seen as `st`) safe: owner first (a chown may clear the bits
    itself), then the mode."""
    if owner is not None and (st.st_uid, st.st_gid) != owner:
        os.fchown(fd, *owner)
    now = os.fstat(fd)
    if safe_mode(now.st_mode) != stat.S_IMODE(now.st_mode):
        os.fchmod(fd, safe_mode(now.st_mode))


def _fix_entry(dir_fd: int, name: str, st: os.stat_result, owner: tuple[int, int] | None) -> bool:
    """Fix a non-directory entry: links and special files only change owner (never opened);
    a regular file through a descriptor that is still the entry looked at."""
    if not stat.S_ISREG(st.st_mode):
        if owner is not None and (st.st_uid, st.st_gid) != owner:
            os.chown(name, *owner, dir_fd=dir_fd, follow_symlinks=False)
        return False
    fd = os.open(name, _OPEN, dir_fd=dir_fd)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return False  # replaced since the look: the next walk sees what is there
        _fix(fd, now, owner)
        return True
    finally:
        os.close(fd)


def _walk(
    dir_fd: int, where: str, depth: int, walked: Walked, owner: tuple[int, int] | None, fix: bool
) -> None:
    try:
        entries = list(os.scandir(dir_fd))
    except OSError:
        return
    for entry in entries:
        if walked.entries >= MAX_ENTRIES:
            walked.complete = False
            return
        walked.entries += 1
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue  # gone since the listing
        if (st.st_dev, st.st_ino) not in walked._seen:
            walked._seen.add((st.st_dev, st.st_ino))
            walked.bytes += st.st_blocks * 512
        relative = f"{where}{entry.name}"
        if stat.S_ISDIR(st.st_mode):
            if depth >= MAX_DEPTH:
                walked.complete = False
                continue
            try:
                child = os.open(entry.name, _OPEN | os.O_DIRECTORY, dir_fd=dir_fd)
            except OSError:
                continue  # replaced by a link or gone: nothing to follow
            try:
                now = os.fstat(child)
                if fix and _needs_change(now, owner):
                    if safe_mode(now.st_mode) != stat.S_IMODE(now.st_mode):
                        walked.cleared.append(relative + "/")
                    _fix(child, now, owner)
                _walk(child, relative + "/", depth + 1, walked, owner, fix)
            finally:
                os.close(child)
        elif fix and _needs_change(st, owner):
            with contextlib.suppress(OSError):
                unsafe = safe_mode(st.st_mode) != stat.S_IMODE(st.st_mode)
                if _fix_entry(dir_fd, entry.name, st, owner) and unsafe:
                    walked.cleared.append(relative)


def _walk_root(root: Path, owner: tuple[int, int] | None, fix: bool) -> Walked:
    walked = Walked()
    try:
        fd = os.open(root, _OPEN | os.O_DIRECTORY)
    except OSError:
        return walked  # absent, or a link: nothing of the session's to walk
    try:
        st = os.fstat(fd)
        walked.bytes += st.st_blocks * 512
        if fix and _needs_change(st, owner):
            _fix(fd, st, owner)
        _walk(fd, "", 1, walked, owner, fix)
    finally:
        os.close(fd)
    return walked


def tidy(root: Path, owner: tuple[int, int] | None = None) -> Walked:
    """`root` and everything below it without set-uid/set-gid bits or world-writable
    directories, and owned by `owner` (uid, gid) when given. `root` itself must not be a
    link (the caller made it: a checkout or a home)."""
    return _walk_root(root, owner, fix=True)


def measure(root: Path) -> Walked:
    """What `root` holds on disk (its `bytes`), walked without changing anything."""
    return _walk_root(root, None, fix=False)
