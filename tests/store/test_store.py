"""The migrations and the models describe the same schema, on both backends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.store.engines import make_engine, migrate
from app.store.tables import Base

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.empty_database  # the migrations run here from nothing, on both backends


def test_migrations_match_models(database_url):
    engine = make_engine(database_url)
    migrate(engine)
    migrate(engine)  # idempotent
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []


def test_processes_starting_together_on_a_fresh_database_all_migrate_it(database_url):
    """Replicas and workers started at once: none fails on another's half-made schema."""
    code = f"from app.store.engines import make_engine, migrate; migrate(make_engine({database_url!r}))"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stderr=subprocess.PIPE)
        for _ in range(3)
    ]
    for proc in procs:
        _out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err.decode()[-1000:]
