"""Importing the code wires nothing: every SQLAlchemy hook of ours is installed by an
explicit call at start (`build_state` → `watch_changes`, a queued job's own session), never
as a side effect of an import, where no call site would show it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imports every module of app/, channels/ and hooks/ (Alembic's migration scripts run only
# inside Alembic), then lists the listeners of ours on the classes a module could hook into.
# With `--wire`, it then wires a SQLite engine the way `build_state` does and lists again:
# the control that shows the scan sees a registration when there is one.
SCRIPT = r"""
import importlib, json, pkgutil, sys
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Mapper, Session
from sqlalchemy.pool import Pool

names = []
for package in ("app", "channels", "hooks"):
    names.append(package)
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + "."):
        if ".migrations" not in info.name and not info.name.endswith("__main__"):
            names.append(info.name)
for name in names:
    importlib.import_module(name)

OURS = ("app", "channels", "hooks")

def listeners():
    found = []
    for target in (Session, Engine, Pool, Mapper):
        for event_name in dir(target.dispatch):
            collection = getattr(getattr(target.dispatch, event_name), "_clslevel", None)
            for fns in (collection or {}).values():
                for fn in fns:
                    module = getattr(fn, "__module__", "") or ""
                    if module.split(".")[0] in OURS:
                        found.append(f"{target.__name__}.{event_name}: {module}.{fn.__name__}")
    from app.workitems.tell.progress import _mark_changed
    if event.contains(Session, "before_flush", _mark_changed):
        found.append("Session.before_flush: progress watch (event.contains)")
    return sorted(set(found))

report = {"modules": len(names), "at_import": listeners()}
if "--wire" in sys.argv:
    from app.workitems.tell.progress import watch_changes
    engine = create_engine("sqlite://")
    watch_changes(engine)
    report["wired"] = listeners()
    from app.workitems.tell.progress import unwatch_changes
    unwatch_changes(engine)
    report["unwired"] = listeners()
print(json.dumps(report))
"""


def _scan(*args: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_module_registers_no_listener():
    report = _scan("--wire")
    assert int(str(report["modules"])) > 100  # the walk found the tree, not an empty path
    assert report["at_import"] == []
    # The same scan sees the progress watch once it is wired explicitly.
    assert "Session.before_flush: progress watch (event.contains)" in report["wired"]  # type: ignore[operator]
    # The App's shutdown takes it off again: the process keeps nothing of a stopped App.
    assert report["unwired"] == []


def test_the_progress_watch_follows_only_the_engine_it_was_given(tmp_path):
    """A flush on the wired engine makes the item's progress comment due; the same change
    on an engine nobody wired (another store in the same process) leaves its row alone. It
    is due one window later: the window the engine was wired with."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy.orm import Session

    from app.store.engines import make_engine, migrate
    from app.store.tables import WorkItem, WorkItemStatus, aware
    from app.workitems.tell.progress import unwatch_changes, watch_changes

    engines = [make_engine(f"sqlite:///{tmp_path / name}.db") for name in ("wired", "other")]
    try:
        for engine in engines:
            migrate(engine)
            with Session(engine) as db, db.begin():
                db.add(
                    WorkItem(
                        id="github:o/r#3",
                        repo_full_name="o/r",
                        issue_number=3,
                        state=WorkItemStatus.FROZEN,
                        frozen={"skips": []},
                    )
                )
        watch_changes(engines[0])
        watch_changes(engines[0], timedelta(hours=1))  # idempotent: one hook, one bump per flush
        revisions = []
        changed = datetime.now(UTC)
        for engine in engines:
            with Session(engine) as db, db.begin():
                item = db.get(WorkItem, "github:o/r#3")
                assert item is not None
                before = item.progress_rev or 0
                item.phase = "design"
            with Session(engine) as db:
                item = db.get(WorkItem, "github:o/r#3")
                assert item is not None
                revisions.append((item.progress_rev or 0) - before)
                due = item.progress_due_at
            if engine is engines[0]:
                assert due is not None and aware(due) >= changed + timedelta(hours=1)
        assert revisions == [1, 0]
        unwatch_changes(engines[0])  # the App's shutdown: its flushes are no longer watched
        with Session(engines[0]) as db, db.begin():
            item = db.get(WorkItem, "github:o/r#3")
            assert item is not None
            before = item.progress_rev or 0
            item.phase = "build"
        with Session(engines[0]) as db:
            item = db.get(WorkItem, "github:o/r#3")
            assert item is not None and (item.progress_rev or 0) == before
    finally:
        for engine in engines:
            engine.dispose()
