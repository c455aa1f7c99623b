"""Replacing a file atomically: a reader sees the old file or the new one, never half.

Every file the product rewrites (the session registry, the work-item state file, trust
files, `.env`, caches, offsets, the stop gate's counts) goes through `write_text_atomic`.
It imports only `os`, because the stop gate loads it on every turn of every session.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from pathlib import Path
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
