"""One exception root per room: every exception class a room defines derives from that room's
root, so a caller can catch "anything this room refused" with one name, and a reader finds a
room's failures by one word. A class keeps its standard-library base beside the root (a caller
catching `ValueError` or `OSError` still catches it). A room with no root listed here defines
no exception; the first one it needs comes with its root."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# room (a package, or "app" for the App's flat modules app/*.py) → its root, "module:Class".
ROOTS = {
    "app": "app.files:CoreError",
    "app.commands": "app.commands.command_errors:CommandError",
    "app.config": "app.config.config_errors:ConfigurationError",
    "app.fleet": "app.fleet.fleet_errors:FleetError",
    "app.gateway": "app.gateway.gateway_errors:GatewayError",
    "app.gitgate": "app.gitgate.gitgate_errors:GitGateError",
    "app.github": "app.github.github_errors:GitHubError",
    "app.ingress": "app.ingress.ingress_errors:IngressError",
    "app.runtime": "app.runtime.serve_errors:ServeError",
    "app.spawner": "app.spawner.spawner_errors:SpawnerError",
    "app.store": "app.store.sqlite_writes:StoreError",
    "app.workitems": "app.workitems.workitem_errors:WorkItemError",
    "channels": "channels.channel_errors:ChannelsError",
    "hooks": "hooks.gate_entry:HooksError",
}


def module_files() -> dict[str, Path]:
    """Every module of the product by dotted name (a package by its `__init__`); Alembic's
    migration scripts are loaded by Alembic, never imported."""
    found = {}
    for top in ("app", "channels", "hooks"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def room_of(module: str, packages: set[str]) -> str:
    """`app.spawner.harness.claude_trust` → `app.spawner`; `app.files` → `app` (a flat module)."""
    parts = module.split(".")
    if parts[0] != "app":
        return parts[0]
    if len(parts) > 1 and "app." + parts[1] in packages:
        return "app." + parts[1]
    return "app"


def root_class(spec: str) -> type[BaseException]:
    module, name = spec.split(":")
    found = getattr(importlib.import_module(module), name)
    assert inspect.isclass(found) and issubclass(found, Exception), spec
    return found


def test_every_exception_a_room_defines_derives_from_its_root() -> None:
    modules = module_files()
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    roots = {room: root_class(spec) for room, spec in ROOTS.items()}
    strays = []
    for name in sorted(modules):
        module = importlib.import_module(name)
        room = room_of(name, packages)
        for attr, value in vars(module).items():
            if not (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ):
                continue
            root = roots.get(room)
            if root is None or not issubclass(value, root):
                strays.append(f"{name}.{attr} (room {room}, root {ROOTS.get(room)})")
    assert strays == []


def test_each_root_lives_in_its_own_room() -> None:
    packages = {name for name, path in module_files().items() if path.name == "__init__.py"}
    for room, spec in ROOTS.items():
        assert room_of(spec.split(":")[0], packages) == room, spec
