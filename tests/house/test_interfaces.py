"""Every room has a front door and a place in the order of rooms.

A room is a package of the product (`app/<room>/`, `channels`, `hooks`). Its `__init__.py`
names what it offers in `__all__`: names it re-exports from its modules, or (for a room whose
modules are entry points, such as `hooks` and `app.commands`) the modules themselves. From
outside a room the product imports only what that list names: `from app.store import WorkItem`,
never `from app.store.tables import WorkItem`. Inside a room, modules import each other by
their full paths and never through their own `__init__`, which would close a circle through it.
So a module that is not in its room's interface can move or split without a reader outside
the room noticing. Tests may reach inside a room: they test its pieces.

The rooms stand in tiers, lowest first; a room imports only rooms of lower tiers (and the
App's flat shared modules, `app/*.py`). No two rooms import each other, and what a low room
needs of a high one is a sign it is in the wrong room.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Lowest first: a room may import the rooms of the tiers before its own.
TIERS = (
    ("app.config", "app.store", "hooks"),
    ("app.gate", "app.gateway", "app.ingress"),
    ("app.github",),
    ("app.workitems",),
    ("app.fleet", "channels"),
    ("app.gitgate", "app.web", "app.spawner"),
    ("app.runtime",),
    ("app.commands",),
)
ROOMS = tuple(room for tier in TIERS for room in tier)
TIER_OF = {room: number for number, tier in enumerate(TIERS) for room in tier}


def room_of(module: str) -> str | None:
    """The room a dotted module name belongs to, or None for the App's flat modules."""
    parts = module.split(".")
    for size in (2, 1):
        if ".".join(parts[:size]) in TIER_OF:
            return ".".join(parts[:size])
    return None


def dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_files() -> list[Path]:
    return [
        path
        for top in ("app", "channels", "hooks")
        for path in sorted((ROOT / top).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def interface_of(room: str) -> list[str] | None:
    """The names in `room`'s `__all__`, read from its source (None when it has none)."""
    init = ROOT / room.replace(".", "/") / "__init__.py"
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return list(ast.literal_eval(node.value))
    return None


@dataclass(frozen=True)
class Entry:
    """One name one module imports from another room: where, what, and through which path."""

    where: str
    line: int
    module: str
    name: str | None  # None for `import a.b`


def entries() -> list[Entry]:
    found = []
    for path in product_files():
        here = room_of(dotted(path))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                pairs = [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                pairs = [(alias.name, None) for alias in node.names]
            else:
                continue
            for module, name in pairs:
                there = room_of(module)
                if there is not None and there != here:
                    where = str(path.relative_to(ROOT))
                    found.append(Entry(where, node.lineno, module, name))
    return found


def through_the_door(entry: Entry, interfaces: dict[str, list[str]]) -> bool:
    room = room_of(entry.module)
    assert room is not None
    offered = interfaces[room]
    if entry.module == room:
        return entry.name is None or entry.name in offered
    # A public module of the room (one its `__all__` names), and anything in it.
    return entry.module.removeprefix(room + ".").split(".")[0] in offered


@pytest.mark.parametrize("room", ROOMS)
def test_every_room_names_its_interface(room: str) -> None:
    offered = interface_of(room)
    assert offered, f"{room}/__init__.py has no __all__"
    assert len(offered) == len(set(offered)), "a name twice"
    package = importlib.import_module(room)
    missing = []
    for name in offered:
        if not hasattr(package, name):
            try:
                importlib.import_module(f"{room}.{name}")
            except ModuleNotFoundError:
                missing.append(name)
    assert missing == [], f"{room} offers names it does not have"


def test_a_room_is_entered_only_through_its_interface() -> None:
    interfaces = {room: interface_of(room) or [] for room in ROOMS}
    offences = [
        f"{e.where}:{e.line} imports {e.module}{'.' + e.name if e.name else ''}"
        for e in entries()
        if not through_the_door(e, interfaces)
    ]
    assert offences == [], "import it from the room itself, or add it to its __all__"


def test_rooms_import_only_rooms_of_lower_tiers() -> None:
    offences = set()
    for e in entries():
        here = room_of(e.where.removesuffix(".py").replace("/", "."))
        there = room_of(e.module)
        if here is not None and there is not None and TIER_OF[there] >= TIER_OF[here]:
            offences.add(f"{e.where}:{e.line}: {here} imports {there}")
    assert sorted(offences) == []


def test_no_module_enters_its_own_room_through_the_front_door() -> None:
    """`from app.store import X` inside `app/store/` would run the room's `__init__`, which
    imports the module back: a circle. Only a room's own submodules go through it."""
    offences = []
    for path in product_files():
        me = dotted(path)
        room = room_of(me)
        if room is None or me == room:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == room:
                for alias in node.names:
                    if (
                        not (ROOT / room.replace(".", "/") / alias.name).exists()
                        and not (ROOT / room.replace(".", "/") / f"{alias.name}.py").exists()
                    ):
                        offences.append(f"{path.relative_to(ROOT)}:{node.lineno}: {alias.name}")
    assert offences == []


def test_every_package_of_the_product_is_a_room_or_inside_one() -> None:
    packages = {
        dotted(path)
        for path in product_files()
        if path.name == "__init__.py" and dotted(path) != "app"
    }
    assert sorted(p for p in packages if room_of(p) is None) == []


def test_the_check_sees_a_side_door() -> None:
    """The control: an import of a room's private module is found and refused."""
    interfaces = {"app.store": ["WorkItem", "inbox"]}
    assert through_the_door(Entry("x.py", 1, "app.store", "WorkItem"), interfaces)
    assert through_the_door(Entry("x.py", 1, "app.store.inbox", "claim"), interfaces)
    assert not through_the_door(Entry("x.py", 1, "app.store.tables", "WorkItem"), interfaces)
    assert not through_the_door(Entry("x.py", 1, "app.store", "Job"), interfaces)
