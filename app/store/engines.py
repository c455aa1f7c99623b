"""Opening the database: one engine per process, its pool sized to its threads, and Alembic
migrations under a lock, on SQLite or PostgreSQL."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from sqlalchemy import Engine, create_engine, event, text

MIGRATIONS = Path(__file__).parent / "migrations"
MIGRATE_LOCK = 0x7468656C6F6F70  # the advisory lock migrations take on PostgreSQL ("theloop")
# Threads of an App process that use a connection besides its web threads and inbox workers:
# the ingest writer, the progress publisher, the job watcher (LISTEN), the chat sender.
BACKGROUND_CONNECTIONS = 4
# Above the pool: the event loop's helper threads (token checks, sampled-event writes) and a
# side write a thread makes while it holds a session. Opened only when needed, closed after.
OVERFLOW_CONNECTIONS = 4


def pool_size(web_threads: int, inbox_workers: int) -> int:
    """Connections one process keeps: one per thread that may hold one at the same time.

    A process never opens more than `pool_size(…) + OVERFLOW_CONNECTIONS`; the README's
    deployment section adds these up over replicas for PostgreSQL's `max_connections`.
    """
    return max(0, web_threads) + max(0, inbox_workers) + BACKGROUND_CONNECTIONS


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def make_engine(url: str, *, web_threads: int = 0, inbox_workers: int = 1) -> Engine:
    """An engine tuned for the backend: SQLite in WAL mode, every connection taking the file's
    write lock at its first write (`sqlite_writes.LockingConnection`), or PostgreSQL
    (connections checked before use, so a restarted server costs no request). Its pool is
    sized for a process of `web_threads` and `inbox_workers` (`pool_size`)."""
    size = pool_size(web_threads, inbox_workers)
    if url.startswith("sqlite"):
        path = url.split("///", 1)[1] if "///" in url else ""  # `sqlite://`: in memory
        if path and path != ":memory:":
            _private_database(Path(path))
        from app.store.sqlite_writes import LockingConnection

        connect_args = {"timeout": 30, "check_same_thread": False, "factory": LockingConnection}
        engine = create_engine(url, connect_args=connect_args, pool_size=max(20, size))
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_size=size, max_overflow=OVERFLOW_CONNECTIONS, pool_pre_ping=True)


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
    """Bring the schema to the newest revision (idempotent). On PostgreSQL, processes that
    start together (replicas, workers) take turns: the first migrates, the others find the
    schema at its newest revision."""
    with _sqlite_migrate_lock(engine):
        _upgrade(engine)


@contextlib.contextmanager
def _sqlite_migrate_lock(engine: Engine) -> Iterator[None]:
    """On a SQLite file: one process at a time migrates (`flock` on `<db>-migratelock`)."""
    database = engine.url.database if engine.dialect.name == "sqlite" else None
    if not database or database == ":memory:":
        yield
        return
    fd = os.open(f"{database}-migratelock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _upgrade(engine: Engine) -> None:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        if is_postgres(engine):  # held until this transaction ends
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATE_LOCK})
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, "head")
