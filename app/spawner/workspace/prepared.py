"""Prepared copies: what a repository's set-up produced, kept to warm the next checkout.

What a set-up produced is what its work tree holds that git does not track — untracked and
ignored files alike (`.venv`, `node_modules`, a build directory, a marker): `produced` lists
them as git's maximal untracked paths (a wholly untracked directory is one entry). Tracked
files are the next checkout's own and never come from a copy; what a set-up writes outside
the checkout (the session's home, caches) is not kept.

A copy lives in the spawner's state directory (no session sees it), one per repository and
manifest key, made once (a temporary directory renamed into place) and only read after; each
new checkout gets its own copy of it (`cp --reflink=auto`: a reflink where the filesystem
offers one), so no two sessions share a file. No link is followed: `cp -a` copies links as
links, and an entry is taken from (or put into) a checkout only when every directory above
it there is a real directory, and put only where nothing is yet.

A set-up writes its checkout's path into some of what it makes: a virtualenv's scripts name
their interpreter by absolute path (`#!/…/.venv/bin/python`), its `activate` names the
directory. Such files — plain files in a `bin` directory holding the first checkout's path —
are listed when the copy is kept, and that path is replaced by the new checkout's in each
copy put.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import uuid
from collections import defaultdict
from pathlib import Path

from app.spawner.workspace.hostgit import HostGit

PREPARED = "prepared"
KEPT_PER_REPOSITORY = 3
ENTRIES = "entries.json"
TREE = "tree"
BATCH = 200  # paths per `cp` call
COPY_TIMEOUT = 1800
MAX_REWRITTEN = 1024 * 1024  # bytes of a `bin` file whose checkout path is rewritten


def store_of(state_dir: Path, repo: str) -> Path:
    """Where `repo`'s prepared copies are kept."""
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in repo) or "_"
    return state_dir / PREPARED / safe


def produced(git: HostGit, checkout: Path) -> list[str]:
    """The checkout's untracked and ignored paths, a wholly untracked directory as one."""
    listed = git.run(checkout, "ls-files", "-z", "--others", "--directory", timeout=300)
    entries = [e.rstrip("/") for e in listed.stdout.split("\0") if e.rstrip("/")]
    return [e for e in entries if _clean(e)]


def _clean(entry: str) -> bool:
    parts = entry.split("/")
    return not entry.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def plain_parents(root: Path, entry: str, *, make: bool = False) -> bool:
    """Is every directory above `entry` under `root` a real directory (no link)? With
    `make`, missing ones are made (as real directories)."""
    here = root
    for part in entry.split("/")[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            if not make:
                return False
            here.mkdir()
            continue
        if not stat.S_ISDIR(mode):
            return False
    return True


def _cp(args: list[str], cwd: Path) -> None:
    proc = subprocess.run(
        ["cp", "-a", "--reflink=auto", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COPY_TIMEOUT,
        check=False,
    )
    if proc.returncode != 0:
        raise OSError(f"cp: {proc.stderr.strip()[:500]}")


def save(store: Path, key: str, checkout: Path, entries: list[str]) -> bool:
    """Keep `entries` of `checkout` as the prepared copy `key` (False: one exists already)."""
    final = store / key
    if final.exists():
        return False
    kept = [e for e in entries if plain_parents(checkout, e)]
    temporary = store / f".{key}.{uuid.uuid4().hex}"
    tree = temporary / TREE
    tree.mkdir(parents=True)
    try:
        for start in range(0, len(kept), BATCH):
            _cp(["--parents", "-t", str(tree), "--", *kept[start : start + BATCH]], checkout)
        where = os.path.realpath(checkout)  # as the set-up saw it
        record = {"checkout": where, "entries": kept, "rewrite": _naming(tree, Path(where))}
        (temporary / ENTRIES).write_text(json.dumps(record))
        os.rename(temporary, final)
    except OSError:
        shutil.rmtree(temporary, ignore_errors=True)
        if final.exists():  # another launch kept the same copy meanwhile
            return False
        raise
    _prune(store)
    return True


def _plain_file(path: Path) -> bytes | None:
    """A plain file's bytes (None: a link, not a file, too large, unreadable)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_REWRITTEN:
            return None
        return file.read(MAX_REWRITTEN + 1)


def _naming(tree: Path, checkout: Path) -> list[str]:
    """The plain files in a `bin` directory of `tree` that hold `checkout`'s path."""
    needle = str(checkout).encode()
    found: list[str] = []
    for top, dirs, files in os.walk(tree):  # links are never followed into
        if Path(top).name != "bin":
            continue
        for name in files:
            data = _plain_file(Path(top) / name)
            if data is not None and needle in data:
                found.append(str((Path(top) / name).relative_to(tree)))
        dirs[:] = [d for d in dirs if d != "bin"]
    return found


def _rewrite(checkout: Path, entry: str, old: str, new: str) -> None:
    """Put the path `new` for `old` in the copied file `entry` (a plain file only)."""
    if not _clean(entry) or not plain_parents(checkout, entry):
        return
    data = _plain_file(checkout / entry)
    if data is None:
        return
    fd = os.open(checkout / entry, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    with os.fdopen(fd, "wb") as file:
        file.write(data.replace(old.encode(), new.encode()))


def _prune(store: Path) -> None:
    """Only the newest KEPT_PER_REPOSITORY copies of a repository stay."""
    copies = [p for p in store.iterdir() if not p.name.startswith(".") and p.is_dir()]
    copies.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in copies[KEPT_PER_REPOSITORY:]:
        shutil.rmtree(old, ignore_errors=True)


def restore(store: Path, key: str, checkout: Path) -> list[str] | None:
    """Copy the prepared copy `key` into `checkout`; the entries put (None: no such copy).
    An entry is skipped where the checkout already has something, or a link above it."""
    final = store / key
    try:
        record = json.loads((final / ENTRIES).read_text())
        entries, old, rewrite = record["entries"], record["checkout"], record["rewrite"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    os.utime(final)  # recently used: kept longest
    by_parent: dict[str, list[str]] = defaultdict(list)
    put: list[str] = []
    for entry in entries:
        if not isinstance(entry, str) or not _clean(entry):
            continue
        if os.path.lexists(checkout / entry) or not plain_parents(checkout, entry, make=True):
            continue
        parent = entry.rpartition("/")[0]
        by_parent[parent].append(str(final / TREE / entry))
        put.append(entry)
    for parent, sources in by_parent.items():
        target = checkout / parent if parent else checkout
        for start in range(0, len(sources), BATCH):
            _cp(["-t", str(target), "--", *sources[start : start + BATCH]], checkout)
    new = os.path.realpath(checkout)
    if isinstance(old, str) and old != new:
        ours = set(put)
        for entry in rewrite if isinstance(rewrite, list) else []:
            parts = entry.split("/") if isinstance(entry, str) else []
            if any("/".join(parts[:n]) in ours for n in range(1, len(parts) + 1)):
                _rewrite(checkout, entry, old, new)
    return put
