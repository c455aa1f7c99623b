"""Replacing a file atomically: a reader sees the old file or the new one, never half.

Every file the product rewrites (the session registry, the work-item state file, trust
files, `.env`, caches, offsets, the stop gate's counts) goes through `write_text_atomic`;
a read-modify-write of a file another of our processes may edit at the same moment holds
`FileLock` around it. Imports stay minimal: the stop gate loads this on every turn.

A file in a tree a session can write (its checkout, its home) is read and written only
through the `…_within` functions: below a trusted root, no link is ever followed, and no
file larger than its reader's bound (`MAX_SESSION_FILE` unless the caller expects less) is
read at all: it raises `FileTooLarge`, so it is never half-read as if it were whole.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import Any, BinaryIO

_COUNTER = itertools.count()
# The most the spawner reads of one file in a tree a session writes (its home, its
# checkout): a larger one is refused whole, so a session cannot make the spawner hold an
# arbitrarily large file in memory. Callers that expect less pass a smaller bound.
MAX_SESSION_FILE = 8 * 1024 * 1024
# The widest mode kept from such a file when it is rewritten: no setuid, setgid, sticky
# or exec bit of the session's survives the spawner's rewrite.
KEPT_FILE_MODE = 0o666


def write_text_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Replace `path` with `text`, created with permissions `mode`.

    Writes a temporary sibling (unique per process, thread and call), then renames it over
    `path`; the temporary file is removed if anything fails. The directory must exist.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{next(_COUNTER)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            # The umask may have narrowed the mode os.open was given; set it on the open
            # file, never by name (a name can be swapped for a link in between).
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any, mode: int = 0o600) -> None:
    """Replace `path` with `data` as indented JSON (see `write_text_atomic`)."""
    write_text_atomic(path, json_text(data), mode)


def json_text(data: Any) -> str:
    """The text every JSON file the product writes holds: indented, newline-terminated."""
    return json.dumps(data, indent=2) + "\n"


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


# Writing in a tree a session can write. The root (a checkout, a session home) is the
# spawner's own directory, in a parent no session can write: it is opened as given. Every
# name below it is opened relative to its parent's descriptor with O_NOFOLLOW, so a link a
# session planted (`~/.claude` -> the operator's home, `.credentials.json` -> a host file)
# is never followed: a linked directory the spawner needs is replaced by a real one, a
# linked file is replaced by the rename, and a link read reads as absent.

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _names(relative: str | PurePosixPath) -> list[str]:
    parts = PurePosixPath(relative).parts
    if not parts or any(p in ("/", ".", "..") for p in parts):
        raise ValueError(f"{relative!s} is not a plain relative path")
    return list(parts)


def _open_dirs(root: Path, names: list[str], *, create: bool, dir_mode: int) -> int:
    """A descriptor of `root/names…`, each name opened without following a link. With
    `create`, a missing directory is made and a link (to anything) is replaced by a new,
    empty directory; without it, a link raises FileNotFoundError (it reads as absent)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in names:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, dir_mode, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                found = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(found.st_mode):
                    raise NotADirectoryError(f"{name} is not a directory") from None
                if not create:
                    raise FileNotFoundError(f"{name} is a link") from None
                os.unlink(name, dir_fd=fd)
                os.mkdir(name, dir_mode, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


class CoreError(Exception):
    """One of the App's flat modules (`app/*.py`) refused its input or could not finish. The
    room's one exception root: every exception it defines derives from it
    (`tests/house/test_exception_roots.py`)."""


class FileTooLarge(CoreError, OSError):
    """A file in a tree a session writes is larger than its reader's bound: it is not read
    at all (never half-read as if whole). The message names the file, its size and the
    bound."""


def _read_at(directory: int, name: str, limit: int = MAX_SESSION_FILE) -> tuple[bytes, int]:
    """(content, permission bits) of the regular file `name`; a link, a directory, a fifo
    or a missing file raise FileNotFoundError, one of more than `limit` bytes (by its size
    once open, or by what a read finds when it grew since) raises FileTooLarge. The bits
    are masked to `KEPT_FILE_MODE`: a session's setuid or exec bit is never carried."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory
        )
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno in (errno.ELOOP, errno.ENXIO):
            raise FileNotFoundError(f"{name} is not a regular file") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        found = os.fstat(fh.fileno())
        if not stat.S_ISREG(found.st_mode):
            raise FileNotFoundError(f"{name} is not a regular file")
        if found.st_size > limit:
            raise FileTooLarge(_too_large(name, found.st_size, limit))
        data = fh.read(limit + 1)
        if len(data) > limit:
            raise FileTooLarge(_too_large(name, len(data), limit, grew=True))
        return data, stat.S_IMODE(found.st_mode) & KEPT_FILE_MODE


def _too_large(name: str, size: int, limit: int, *, grew: bool = False) -> str:
    held = "grew past" if grew else f"is {size} bytes, more than"
    return f"{name} {held} the {limit} bytes read of a file a session writes; not read"


def _replace_at(directory: int, name: str, data: bytes, mode: int) -> None:
    """Replace `name` in `directory` by a new file holding `data` (temp file, then rename:
    a link at `name` is replaced, never followed)."""
    tmp = f".{name}.{os.getpid()}.{threading.get_ident()}.{next(_COUNTER)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, mode, dir_fd=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=directory, dst_dir_fd=directory)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=directory)
        raise


def write_within(
    root: Path,
    relative: str | PurePosixPath,
    data: str | bytes,
    mode: int = 0o600,
    dir_mode: int = 0o700,
) -> None:
    """Replace `root/relative` with `data` (text is UTF-8), following no link below `root`;
    missing directories are made with `dir_mode`."""
    *dirs, name = _names(relative)
    directory = _open_dirs(root, dirs, create=True, dir_mode=dir_mode)
    try:
        _replace_at(directory, name, data.encode() if isinstance(data, str) else data, mode)
    finally:
        os.close(directory)


def remove_within(root: Path, relative: str | PurePosixPath) -> None:
    """Remove the entry `root/relative` (a link is removed, never followed); nothing to do
    when it, or a directory on the way, is missing or a link."""
    *dirs, name = _names(relative)
    try:
        directory = _open_dirs(root, dirs, create=False, dir_mode=0o700)
    except FileNotFoundError:
        return
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        pass
    finally:
        os.close(directory)


def read_within(root: Path, relative: str | PurePosixPath, limit: int = MAX_SESSION_FILE) -> str:
    """The text of the regular file `root/relative`. A link anywhere below `root`, a
    missing file or one that is not a regular file raise FileNotFoundError; one of more
    than `limit` bytes raises FileTooLarge."""
    *dirs, name = _names(relative)
    directory = _open_dirs(root, dirs, create=False, dir_mode=0o700)
    try:
        return _read_at(directory, name, limit)[0].decode("utf-8", "replace")
    finally:
        os.close(directory)


def open_within(root: Path, relative: str | PurePosixPath) -> BinaryIO:
    """The regular file `root/relative` open for reading in binary, reached without following
    a link at any step (a link, a missing file or one that is not regular raise
    FileNotFoundError); the caller reads as much as it trusts."""
    *dirs, name = _names(relative)
    directory = _open_dirs(root, dirs, create=False, dir_mode=0o700)
    try:
        try:
            fd = os.open(
                name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=directory
            )
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) or exc.errno in (errno.ELOOP, errno.ENXIO):
                raise FileNotFoundError(f"{name} is not a regular file") from None
            raise
    finally:
        os.close(directory)
    fh = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        raise FileNotFoundError(f"{name} is not a regular file")
    return fh


def update_within(
    root: Path,
    relative: str | PurePosixPath,
    edit: Callable[[str], str | None],
    new_mode: int = 0o600,
    limit: int = MAX_SESSION_FILE,
) -> bool:
    """Read-modify-write `root/relative` under the directory's `flock` (the lock
    `FileLock` takes): `edit` gets the current text (`""` when the file is missing or is
    not a regular file: a link is never read) and returns the new text, or None to leave
    it. The file keeps its mode (masked to `KEPT_FILE_MODE`); a new one gets `new_mode`.
    True when it was written; a file of more than `limit` bytes raises FileTooLarge and is
    left as it was."""
    import fcntl

    *dirs, name = _names(relative)
    directory = _open_dirs(root, dirs, create=True, dir_mode=0o700)
    try:
        fcntl.flock(directory, fcntl.LOCK_EX)
        try:
            data, mode = _read_at(directory, name, limit)
            text = data.decode("utf-8", "replace")
        except FileNotFoundError:
            text, mode = "", new_mode
        updated = edit(text)
        if updated is None:
            return False
        _replace_at(directory, name, updated.encode(), mode)
        return True
    finally:
        os.close(directory)  # closing the descriptor releases the lock
