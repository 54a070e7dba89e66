"""What the database holds: the schema version recorded by migrations, the pgvector version installed."""

from __future__ import annotations

from .connection import Connection


def schema_version(conn: Connection) -> int | None:
    """The newest migration recorded in schema_migrations; None when no migration ever ran."""
    # to_regclass answers NULL for a missing table, where a query on it would fail (42P01).
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if exists is None or not exists[0]:
        return None
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def pgvector_version(conn: Connection) -> str | None:
    """The version of the installed `vector` extension; None when it is not installed."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return None if row is None else str(row[0])
