"""Writing a JSON file atomically, so a reader sees the old file or the new one, never half."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any, mode: int) -> None:
    """Replace `path` with `data` as indented JSON with permissions `mode`.

    Writes a temp file in the same directory, then renames it over `path`; the temp file is
    removed if anything fails. The directory must exist.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
