"""The house rules of the layout, checked on the source: what each room may import, and no
two modules that a reader could confuse by name (`docs/architecture.md` draws the rooms)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# room -> module prefixes it must never import (directly or as `from x import y`)
FORBIDDEN = {
    "app/gate": (
        "app.store",
        "app.github",
        "app.fleet",
        "app.gitgate",
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
        "app.commands",
        "app.cli",
        "app.store",
        "app.fleet",
        "app.gitgate",
        "app.workitems",
        "app.github",
        "app.github.services",
        "app.audit",
        "sqlalchemy",
        "flask",
        "githubkit",
        "channels",
    ),
    "app/gateway": (
        "app.store",
        "app.fleet",
        "app.gitgate",
        "app.workitems",
        "app.github",
        "app.spawner",
        "app.github.services",
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
    "app/store": (
        "app.workitems",
        "app.fleet",
        "app.gitgate",
        "app.github",
        "app.spawner",
        "channels",
    ),
    "app/workitems": ("app.spawner", "app.fleet", "app.gitgate", "channels"),
    "app/fleet": ("app.spawner", "app.gitgate", "channels"),
    "app/gitgate": ("app.spawner", "app.workitems", "app.gateway", "channels"),
    "channels": ("app.spawner", "app.fleet", "app.gitgate"),
}
# Allowed flat modules under app/: everything else lives in a room (a package).
FLAT = {
    "__init__",
    "audit",
    "cli",
    "files",
    "graph",
    "mirror",
    "protocol",
    "retry",
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
    """The gate's room reaches only the standard library, `app.graph`, `app.workstate` and
    `app.files` (`gate_entry.py`, the gate's entry in a settings file, writes with it)."""
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
        "app.files.write_json",
        "app.files.write_text_atomic",
        "app.workstate",
        "hooks",
        "hooks.gate",
        "hooks.gate.read_hook_input",
        "hooks.gate.run",
        "hooks.gate.unusable_facts",
        "hooks.stop_gate",
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


def test_class_names_do_not_repeat_across_the_product() -> None:
    """One name per concept: two classes a reader could mistake for each other get names
    that say which is which."""
    names = Counter(
        node.name
        for top in ("app", "channels", "hooks")
        for path in (ROOT / top).rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef)
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


TESTS = ROOT / "tests"


def test_tests_live_in_the_rooms_they_test() -> None:
    """Every test file sits in a directory named for what it tests, none at the top."""
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    assert all((d / "__init__.py").exists() for d in TESTS.iterdir() if any(d.glob("test_*.py")))


def test_no_test_file_imports_another_and_fixtures_come_from_conftest_or_plugins() -> None:
    """Shared helpers live in `tests/*_support.py`; a fixture reaches a test through a
    conftest or a registered plugin, never through an unused import."""
    offences = []
    for path in sorted(TESTS.rglob("test_*.py")):
        text = path.read_text()
        imported = {n for n in imports_of(path) if re.match(r"tests\.(\w+\.)*test_", n)}
        if imported:
            offences.append(f"{path.relative_to(ROOT)} imports {sorted(imported)}")
        if re.search(r"^from tests\S* import [^\n]*# noqa: F401", text, re.M):
            offences.append(f"{path.relative_to(ROOT)} switches a fixture on by importing it")
    assert offences == []


def test_the_app_under_test_has_one_environment_fixture() -> None:
    defined = [
        str(path.relative_to(ROOT))
        for path in sorted(TESTS.rglob("*.py"))
        if re.search(r"^def settings_env\(", path.read_text(), re.M)
    ]
    assert defined == ["tests/conftest.py"]


def fixture_names(path: Path) -> list[str]:
    """The names of the fixtures `path` defines (`@pytest.fixture`, with or without arguments,
    and its `name=` if given)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            call = decorator if isinstance(decorator, ast.Call) else None
            if ast.unparse(call.func if call else decorator) not in ("pytest.fixture", "fixture"):
                continue
            named = [k.value for k in (call.keywords if call else ()) if k.arg == "name"]
            found.append(
                named[0].value if named and isinstance(named[0], ast.Constant) else node.name
            )
    return found


def test_no_fixture_is_defined_twice() -> None:
    """One definition per fixture name: a module says what it needs of a shared fixture
    (markers, module settings such as `OPERATOR_YAML`), and a fixture of its own that is
    something else gets a name of its own, never one that shadows another."""
    where: dict[str, list[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        for name in fixture_names(path):
            where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in where.items() if len(paths) > 1} == {}
