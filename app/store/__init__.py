"""Database access: one engine per process, Alembic migrations, SQLite or PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Engine, create_engine, event

MIGRATIONS = Path(__file__).parent / "migrations"


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def make_engine(url: str) -> Engine:
    """An engine tuned for the backend: SQLite in WAL mode, every connection taking the file's
    write lock at its first write (`sqlite_writes.LockingConnection`), or PostgreSQL."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""  # `sqlite://`: in memory
        if path and path != ":memory:":
            _private_database(Path(path))
        from app.store.sqlite_writes import LockingConnection

        connect_args = {"timeout": 30, "check_same_thread": False, "factory": LockingConnection}
        engine = create_engine(url, connect_args=connect_args, pool_size=20)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


def _private_database(path: Path) -> None:
    """Create the database file 0600 in a 0700 directory before SQLite opens it (SQLite gives
    its journal and WAL files the database file's mode); narrow an existing wider file."""
    from app.files import private_dir

    private_dir(path.parent)
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o600)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest revision (idempotent)."""
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")
