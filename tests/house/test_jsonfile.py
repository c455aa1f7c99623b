"""The atomic JSON writer shared by `hooks install` and the trust file merge."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from app.files import write_json


def test_writes_indented_json_with_the_given_mode(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    write_json(path, {"a": [1]}, 0o640)
    assert path.read_text() == '{\n  "a": [\n    1\n  ]\n}\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text('{"kept": true}\n')
    with pytest.raises(TypeError):
        write_json(path, {"bad": object()}, 0o600)
    assert json.loads(path.read_text()) == {"kept": True}
    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
