"""The house rules of the layout, checked on the source: what each room may import, and no
two modules that a reader could confuse by name (`docs/architecture.md` draws the rooms)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# room -> module prefixes it must never import (directly or as `from x import y`)
FORBIDDEN = {
    "app/gate": (
        "app.store",
        "app.github",
        "app.fleet",
        "app.workitems",
        "app.spawner",
        "sqlalchemy",
        "githubkit",
        "flask",
        "slack_sdk",
        "slack_bolt",
        "httpx",
    ),
    "app/spawner": (
        "app.store",
        "app.fleet",
        "app.workitems",
        "app.github",
        "app.services",
        "app.audit",
        "sqlalchemy",
        "flask",
        "githubkit",
        "channels",
    ),
    "app/gateway": (
        "app.store",
        "app.fleet",
        "app.workitems",
        "app.github",
        "app.spawner",
        "app.services",
        "app.audit",
        "app.commands",
        "sqlalchemy",
        "flask",
        "githubkit",
        "channels",
    ),
    "hooks": (
        "app.store",
        "app.config",
        "app.spawner",
        "app.gate",
        "sqlalchemy",
        "pydantic",
        "yaml",
        "dataclasses",
        "typing_extensions",
    ),
    "app/store": ("app.workitems", "app.fleet", "app.github", "app.spawner", "channels"),
    "app/workitems": ("app.spawner", "app.fleet", "channels"),
    "app/fleet": ("app.spawner", "channels"),
    "channels": ("app.spawner", "app.fleet"),
}
# Allowed flat modules under app/: everything else lives in a room (a package).
FLAT = {
    "__init__",
    "asgi",
    "audit",
    "cli",
    "config",
    "config_compat",
    "files",
    "graph",
    "harnesses",
    "mirror",
    "protocol",
    "retry",
    "runtime",
    "services",
    "settings",
    "workstate",
}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_a_room_imports_nothing_it_must_not(room: str) -> None:
    offences = []
    for path in sorted((ROOT / room).rglob("*.py")):
        for name in imports_of(path):
            bad = [p for p in FORBIDDEN[room] if name == p or name.startswith(p + ".")]
            if bad:
                offences.append(f"{path.relative_to(ROOT)} imports {name}")
    assert offences == []


def test_the_stop_gate_imports_only_the_standard_library_and_its_two_modules() -> None:
    own = {
        name
        for path in (ROOT / "hooks").glob("*.py")
        for name in imports_of(path)
        if name.startswith(("app", "hooks", "channels"))
    }
    allowed = {
        "app",
        "app.graph",
        "app.files",
        "app.files.write_text_atomic",
        "app.workstate",
        "hooks",
        "hooks.gate",
        "hooks.gate.read_hook_input",
        "hooks.gate.run",
    }
    assert own <= allowed, own - allowed


def test_module_names_do_not_repeat_across_the_product() -> None:
    names = Counter(
        path.stem
        for top in ("app", "channels", "hooks")
        for path in (ROOT / top).rglob("*.py")
        if path.stem != "__init__" and "migrations" not in path.parts
    )
    assert [name for name, count in names.items() if count > 1] == []


def test_app_keeps_few_flat_modules() -> None:
    flat = {path.stem for path in (ROOT / "app").glob("*.py")}
    assert flat <= FLAT, flat - FLAT


def test_the_architecture_page_names_every_module() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    unnamed = [
        str(path.relative_to(ROOT))
        for top in ("app", "channels", "hooks")
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.stem != "__init__"
        and "migrations" not in path.parts
        and not re.search(rf"(?<![\w]){re.escape(path.stem)}(?![\w])", page)
    ]
    assert unnamed == [], "name these in docs/architecture.md"
