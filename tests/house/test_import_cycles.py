"""No two modules of the product import each other, directly or around a circle.

A circle makes its modules one piece: none can be read, tested or moved without the others,
and the import order decides which of them sees the other half-built. The graph is read from
the source with `ast`, and every import counts wherever it stands: at the top, inside a
function, or under `if TYPE_CHECKING:` (an import moved into a function or a type-only block
is how a circle hides, and a type still ties its user to its owner). What two modules share
belongs in a module below both of them."""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPS = ("app", "channels", "hooks")


def module_files() -> dict[str, Path]:
    """Every module of the product by dotted name (a package by its `__init__`); Alembic's
    migration scripts are loaded by Alembic, never imported."""
    found = {}
    for top in TOPS:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_by(path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The product's modules `path` imports, each with the line of its first import.
    `from a.b import c` names the module `a.b.c` when there is one, else `a.b`."""
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                names.append(submodule if submodule in modules else node.module)
        for name in names:
            if name in modules and (name not in found or node.lineno < found[name]):
                found[name] = node.lineno
    return found


def import_graph() -> dict[str, dict[str, int]]:
    modules = module_files()
    graph = {name: imported_by(path, modules) for name, path in modules.items()}
    for name, edges in graph.items():
        edges.pop(name, None)
    return graph


def knots(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative): each
    is a set of modules that all reach each other through their imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def circle_through(start: str, graph: dict[str, dict[str, int]], knot: set[str]) -> list[str]:
    """One shortest circle from `start` back to itself, inside `knot` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for step in sorted(graph[node]):
                if step not in knot:
                    continue
                if step == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if step not in came_from:
                    came_from[step] = node
                    following.append(step)
        frontier = following
    return [start]


def described(knot: list[str], graph: dict[str, dict[str, int]]) -> str:
    """A knot as its circles and the import lines that close them, one module per line."""
    members = set(knot)
    lines = [f"{len(knot)} modules import each other around a circle:"]
    seen: set[tuple[str, ...]] = set()
    for start in knot:
        circle = circle_through(start, graph, members)
        turn = circle.index(min(circle[:-1]))
        key = tuple(circle[turn:-1] + circle[:turn])
        if key in seen:
            continue
        seen.add(key)
        steps = [f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(circle)]
        lines.append("  " + " -> ".join([*steps, circle[-1]]))
    return "\n".join(lines)


def test_no_module_imports_itself_around_a_circle() -> None:
    graph = import_graph()
    found = knots(graph)
    report = "\n".join(described(knot, graph) for knot in found)
    print(report)
    assert found == [], "\n" + report


# The spawner's rooms: its subpackages, and each of its top-level modules as a room of its own
# (`__init__` is the package's own module, the exception root). Lowest first: a room imports
# only rooms in layers below its own, never one beside or above it, so no two rooms import each
# other, even around a circle. What two rooms share moves down to a room below both; a step
# that takes the whole `SpawnerContext` sits above the context, in `steps`.
SPAWNER_LAYERS = (
    ("spawner_errors", "locks", "naming"),  # the exception root, the item locks, item names
    ("appclient",),  # the App over HTTP
    ("eventqueue",),  # the events outbox, sent through the client
    ("confine",),  # what a session may see: the sandbox, its home, its limits
    ("network", "workspace"),  # a session's closed network; an item's checkout and git
    ("harness",),  # one adapter per harness, in confine's and workspace's terms
    ("argv",),  # the launch argv, from the adapter's flags
    ("registry",),  # the sessions on record, each with its launch
    ("session",),  # a session in its pane: tmux, screens read, the watchdog, leftovers
    ("context", "probes"),  # the host-side objects every job is given; `models check`
    ("steps", "devbox_checks"),  # what a job does with the context; doctor's checks
    ("launch", "setup_run", "netchecks"),  # a launch, the set-up run before it
    ("jobkinds", "standing_sessions"),  # the jobs; the standing sessions
    ("standing_control",),  # the socket `standing start|stop` talk to
    ("agent",),  # the claim loop
    ("assembly",),  # the agent built from its parts
    ("__init__",),  # the front door: what the room offers the CLI (`__all__`)
)


def spawner_room(module: str) -> str:
    """The spawner's room `module` lies in, by its short name ("" outside the spawner)."""
    parts = module.split(".")
    if parts[:2] != ["app", "spawner"]:
        return ""
    if len(parts) == 2:
        return "__init__"
    return parts[2]


def upward_imports(
    graph: dict[str, dict[str, int]], layers: tuple[tuple[str, ...], ...]
) -> list[str]:
    """Each import of a spawner room from a room not below it, as the module, its line and
    the rooms' names."""
    layer_of = {room: at for at, layer in enumerate(layers) for room in layer}
    found = []
    for module, edges in sorted(graph.items()):
        here = spawner_room(module)
        for target, line in sorted(edges.items()):
            there = spawner_room(target)
            if here and there and here != there and layer_of[there] >= layer_of[here]:
                found.append(f"{module} (line {line}) imports {target}: {here} -> {there}")
    return found


def test_every_spawner_room_has_its_layer() -> None:
    rooms = {spawner_room(module) for module in import_graph()} - {""}
    placed = {room for layer in SPAWNER_LAYERS for room in layer}
    assert sorted(rooms - placed) == [], "place these rooms in SPAWNER_LAYERS"
    assert sorted(placed - rooms) == [], "no such room in app/spawner"
    assert len(placed) == sum(len(layer) for layer in SPAWNER_LAYERS), "a room placed twice"


def test_the_spawner_rooms_import_only_rooms_below_them() -> None:
    """An upward import (or one between rooms of the same layer) fails here, named by its
    module and line: move the piece both need down, or the importer up."""
    found = upward_imports(import_graph(), SPAWNER_LAYERS)
    assert found == [], "\n" + "\n".join(found)


def test_an_upward_import_between_the_spawner_rooms_is_found() -> None:
    """The control: an import of a room beside or above its importer is named; one below is
    not, and neither is an import inside one room or from outside the spawner."""
    graph = {
        "app.spawner.confine.sandbox": {"app.spawner.session.tmux": 7, "app.spawner": 3},
        "app.spawner.session.tmux": {"app.spawner.confine.sandbox": 2, "app.spawner.naming": 4},
        "app.spawner.naming": {"app.spawner.locks": 5},
        "app.spawner.locks": {},
        "app.spawner": {},
        "app.cli": {"app.spawner.session.tmux": 9},
    }
    layers = (("__init__", "naming", "locks"), ("confine",), ("session",))
    assert upward_imports(graph, layers) == [
        "app.spawner.confine.sandbox (line 7) imports app.spawner.session.tmux: confine -> session",
        "app.spawner.naming (line 5) imports app.spawner.locks: naming -> locks",
    ]


def test_the_graph_sees_imports_in_functions_and_type_only_blocks(tmp_path: Path) -> None:
    """The control: the reader finds an import wherever it stands, so a circle cannot hide
    from this test by moving an import into a function or under TYPE_CHECKING."""
    modules = {name: Path() for name in ("a", "a.b", "a.c", "a.d")}
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from a.b import Thing\n"
        "def f():\n"
        "    import a.c\n"
        "from a import d\n"
    )
    probe = tmp_path / "probe.py"
    probe.write_text(source)
    assert imported_by(probe, modules) == {"a.b": 3, "a.c": 5, "a.d": 6}
    assert knots({"x": {"y": 1}, "y": {"z": 1}, "z": {"x": 1}, "w": {"x": 1}}) == [["x", "y", "z"]]
