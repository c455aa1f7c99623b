"""The database: one engine per process, Alembic migrations, SQLite or PostgreSQL, and the
tables, queues and leases the App keeps in it."""
