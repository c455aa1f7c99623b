"""Every event a spawner emits is one the App accepts: the spawner's emit sites, walked in
its source, name only events in `app.protocol.SPAWNER_EVENTS`, and the App's check accepts
each of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import app
from app.fleet.reports import APP_NAMES, check_event
from app.protocol import SPAWNER_EVENTS
from app.spawner.eventqueue import SpawnerEvents

ROOT = Path(app.__file__).parent
DEVBOX = [*(ROOT / "spawner").rglob("*.py"), *(ROOT / "commands").rglob("*.py")]


def emitted_names() -> dict[str, list[str]]:
    """The event name at each emit site: `…emit("name", …)`, and `event="name"` passed on to
    a helper that emits it. A name that is not a literal is reported as its source text."""
    found: dict[str, list[str]] = {}
    for path in DEVBOX:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            args: list[ast.expr] = []
            if called == "emit" and node.args:
                args.append(node.args[0])
            args += [k.value for k in node.keywords if k.arg == "event"]
            for arg in args:
                name = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
                found.setdefault(str(name), []).append(f"{path.name}:{node.lineno}")
    return found


def test_every_literal_emit_site_names_an_event_the_app_accepts() -> None:
    found = emitted_names()
    literal = {n for n in found if "." in n and n.replace(".", "").replace("_", "").isalnum()}
    assert len(literal) >= 20, found  # the walk finds the emit sites at all
    unknown = {n: found[n] for n in literal - SPAWNER_EVENTS}
    assert not unknown, f"emitted but not in app.protocol.SPAWNER_EVENTS: {unknown}"
    computed = {n: sites for n, sites in found.items() if n.startswith(("f'", 'f"'))}
    assert not computed, f"an event name built at run time cannot be checked: {computed}"


@pytest.mark.parametrize("name", sorted(SPAWNER_EVENTS))
def test_the_app_accepts_every_spawner_event(name: str) -> None:
    assert check_event({"event": name, "work_item_id": "o/r#1"}) is None


def test_the_app_names_its_own_events_apart() -> None:
    assert not SPAWNER_EVENTS & APP_NAMES
    assert check_event({"event": "session.spawn_failed"}) is not None


def test_the_outbox_refuses_a_name_the_app_would_refuse(tmp_path: Path) -> None:
    events = SpawnerEvents(tmp_path)
    with pytest.raises(ValueError, match="SPAWNER_EVENTS"):
        events.emit("session.spawn_failed", "o/r#1")
    events.emit("session.job_failed", "o/r#1", kind="spawn", error="no claude")
    assert "session.job_failed" in (tmp_path / "events.jsonl").read_text()
