"""Importing the code wires nothing, and no hook of ours sits on SQLAlchemy's own classes:
every SQLAlchemy hook is installed by an explicit call at start (`build_state` hangs the
progress watch on the App's `Sessions`; a queued job hooks its own session), never as a side
effect of an import, where no call site would show it, and never where another App's
sessions would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Imports every module of app/, channels/ and hooks/ (Alembic's migration scripts run only
# inside Alembic), then lists the listeners of ours on the classes a module could hook into
# and on their subclasses (a sessionmaker's sessions are one), naming which. With `--wire`,
# it then wires a SQLite engine's sessions the way `build_state` does and lists again: the
# control that shows the scan sees a registration when there is one.
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
            for cls, fns in (collection or {}).items():
                where = target.__name__ if cls is target else f"a {target.__name__} subclass"
                for fn in fns:
                    module = getattr(fn, "__module__", "") or ""
                    if module.split(".")[0] in OURS:
                        found.append(f"{where}.{event_name}: {module}.{fn.__name__}")
    return sorted(set(found))

report = {"modules": len(names), "at_import": listeners()}
if "--wire" in sys.argv:
    from app.store import Sessions
    from app.workitems import ProgressWatch
    sessions, watch = Sessions(create_engine("sqlite://")), ProgressWatch()
    watch.watch(sessions)
    report["wired"] = listeners()
    watch.unwatch(sessions)
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
    # The same scan sees the progress watch once it is wired explicitly, on the sessions of
    # the one App that wired it, never on SQLAlchemy's `Session` class.
    assert report["wired"] == [
        "a Session subclass.before_flush: app.workitems.tell.progress._mark_changed"
    ]
    # The App's shutdown takes it off again: the process keeps nothing of a stopped App.
    assert report["unwired"] == []


def test_the_progress_watch_follows_only_the_sessions_of_its_app(tmp_path):
    """A flush in a session the App opened makes the item's progress comment due; the same
    change in a session opened apart from the App's (another App's on the same database, a
    command's) leaves its row alone. It is due one window later: the App's window."""
    from datetime import UTC, datetime, timedelta

    from app.store import Sessions
    from app.store.engines import make_engine, migrate
    from app.store.tables import WorkItem, WorkItemStatus, aware
    from app.workitems import ProgressWatch

    engine = make_engine(f"sqlite:///{tmp_path / 'store'}.db")
    migrate(engine)
    apps, apart = Sessions(engine), Sessions(engine)
    watch = ProgressWatch(timedelta(hours=1))
    try:
        with apart() as db, db.begin():
            db.add(
                WorkItem(
                    id="github:o/r#3",
                    repo_full_name="o/r",
                    issue_number=3,
                    state=WorkItemStatus.FROZEN,
                    frozen={"skips": []},
                )
            )
        watch.watch(apps)
        watch.watch(apps)  # idempotent: one hook, one bump per flush

        def bumped(sessions: Sessions, phase: str) -> tuple[int, datetime | None]:
            with sessions() as db, db.begin():
                item = db.get(WorkItem, "github:o/r#3")
                assert item is not None
                before = item.progress_rev or 0
                item.phase = phase
            with sessions() as db:
                item = db.get(WorkItem, "github:o/r#3")
                assert item is not None
                return (item.progress_rev or 0) - before, aware(item.progress_due_at)

        changed = datetime.now(UTC)
        assert bumped(apart, "design")[0] == 0
        revision, due = bumped(apps, "tasks")
        assert revision == 1  # the control: the App's own session is watched
        assert due is not None and due >= changed + timedelta(hours=1)
        watch.unwatch(apps)  # the App's shutdown: its flushes are no longer watched
        assert bumped(apps, "build")[0] == 0
    finally:
        engine.dispose()
