"""What the spawner, on the host, sees of a session's artifacts in its checkout.

A session asks the App to move its work item on (`the-loop phase next`); the App moves only
when the item's spawner has reported seeing that phase's artifacts (`session.evidence`, sent
by the watchdog whenever what it sees changes). The checkout is the session's to write, so
it is read here as data and never followed: every directory from the checkout down to
`docs/specs/<item>/` is opened relative to the one above it with `O_NOFOLLOW`, an artifact
counts only as a regular file (a link to anything, inside or outside, is no artifact), and
the task list is read through its own no-follow descriptor, up to `MAX_TASKS_BYTES`.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from app import graph

MAX_TASKS_BYTES = 1024 * 1024
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def host_evidence(checkout: Path, spec_id: str) -> graph.Evidence:
    """The artifacts of `spec_id` in `checkout` as the host sees them; nothing when the
    folder is missing, is reached through a link, or cannot be read."""
    if not graph.ITEM_RE.match(spec_id):
        return graph.Evidence()
    opened: list[int] = []
    try:
        opened.append(os.open(checkout, _DIRECTORY))
        for part in ("docs", "specs", spec_id):
            opened.append(os.open(part, _DIRECTORY, dir_fd=opened[-1]))
        return _read_folder(opened[-1])
    except OSError:
        return graph.Evidence()
    finally:
        for fd in opened:
            os.close(fd)


def _read_folder(folder: int) -> graph.Evidence:
    present: set[str] = set()
    empty: set[str] = set()
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".md") and entry.is_file(follow_symlinks=False):
                size = entry.stat(follow_symlinks=False).st_size
                there = graph.counts_as_present(entry.name, size, _head_of(folder, entry.name))
                (present if there else empty).add(entry.name)
    open_, total = 0, 0
    if graph.TASKS_FILE in present:
        with contextlib.suppress(OSError):
            open_, total = graph.count_tasks(_read_regular(folder, graph.TASKS_FILE))
    return graph.Evidence(frozenset(present), frozenset(empty), open_, total)


def _head_of(folder: int, name: str) -> Callable[[], str]:
    """The start of an artifact's text, read as `graph.counts_as_present` asks (nothing
    when it cannot be read as a regular file)."""

    def read() -> str:
        try:
            return _read_regular(folder, name, graph.ARTIFACT_READ)
        except OSError:
            return ""

    return read


def _read_regular(folder: int, name: str, limit: int = MAX_TASKS_BYTES) -> str:
    """A regular file's text (up to `limit` bytes), opened without following a link
    (OSError otherwise)."""
    fd = os.open(name, _FILE, dir_fd=folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{name} is not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace")
