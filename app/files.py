"""Replacing a file atomically: a reader sees the old file or the new one, never half.

Every file the product rewrites (the session registry, the work-item state file, trust
files, `.env`, caches, offsets, the stop gate's counts) goes through `write_text_atomic`;
a read-modify-write of a file another of our processes may edit at the same moment holds
`FileLock` around it. Imports stay minimal: the stop gate loads this on every turn.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

_COUNTER = itertools.count()


def write_text_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace `path` with `text`, created with permissions `mode`.

    Writes a temporary sibling (unique per process, thread and call), then renames it over
    `path`; the temporary file is removed if anything fails. The directory must exist.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{next(_COUNTER)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)  # the umask may have narrowed the mode os.open was given
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    """Replace `path` with `data` as indented JSON (see `write_text_atomic`)."""
    write_text_atomic(path, json.dumps(data, indent=2) + "\n", mode)


def private_dir(path: Path) -> Path:
    """Create `path` (and its parents) so that only this user can enter it: 0700. A directory
    that already exists with wider permissions is narrowed."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if os.stat(path).st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


class FileLock:
    """An exclusive `flock` for a read-modify-write of `path`, between processes and threads.

    The lock is taken on the directory holding the file: the file itself is replaced by a
    rename on every write (its old inode would hold a lock nobody waits on), and a sidecar
    lock file would be litter in someone's home. Each `with` opens the directory anew, so
    two threads of one process exclude each other too. Writers that do not take it (Claude
    Code itself) are not excluded: callers still merge rather than replace.
    """

    def __init__(self, path: Path) -> None:
        self.directory = path.parent
        self._fd: int | None = None

    def __enter__(self) -> FileLock:
        import fcntl

        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        import fcntl

        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
