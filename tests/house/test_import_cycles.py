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


# The spawner's rooms (its subpackages; each of its top-level modules counts as its own) that
# still import each other both ways. No module closes a circle (above), but these rooms do:
# each pair is a piece in the wrong room, waiting for its move. A pair is never added here;
# one moved apart is taken out.
SPAWNER_ROOMS = ("confine", "harness", "network", "session", "steps", "workspace")
KNOWN_TWO_WAY: set[tuple[str, str]] = set()


def spawner_room(module: str) -> str:
    parts = module.split(".")
    if parts[:2] == ["app", "spawner"] and len(parts) > 2 and parts[2] in SPAWNER_ROOMS:
        return ".".join(parts[:3])
    return module


def test_the_spawner_rooms_import_each_other_both_ways_only_where_they_still_do() -> None:
    """New two-way pairs between the spawner's rooms fail here; the known ones are listed
    with what ties them, so each can be moved apart and struck off."""
    rooms: dict[str, set[str]] = {}
    for module, edges in import_graph().items():
        if module.startswith("app.spawner"):
            here = spawner_room(module)
            rooms.setdefault(here, set()).update(
                spawner_room(e) for e in edges if e.startswith("app.spawner")
            )
    pairs = {
        (a, b)
        for a, targets in rooms.items()
        for b in targets
        if a < b and a in rooms.get(b, set())
    }
    assert sorted(pairs - KNOWN_TWO_WAY) == [], "a new two-way pair of the spawner's rooms"
    assert sorted(KNOWN_TWO_WAY - pairs) == [], "moved apart: strike it off KNOWN_TWO_WAY"


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
