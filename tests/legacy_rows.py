"""Rows as an older release left them, for the tests of what the service does with them now: made with
the owner's SQL, since today's write path refuses them."""

from __future__ import annotations

from pathlib import Path

import psycopg
from psycopg import sql


def rename_document(conninfo: str, store: str, old: str, new: str) -> None:
    """Give a stored document another id: its row, its source, its chunks and their keyword rows (the
    foreign keys are off for the move, which only the owner may do)."""
    with psycopg.connect(conninfo) as conn:
        conn.execute("SET LOCAL session_replication_role = replica")
        (store_id,) = conn.execute("SELECT id FROM stores WHERE name = %s", (store,)).fetchone() or (None,)
        conn.execute(
            "UPDATE documents SET id = %s, source = %s WHERE store_id = %s AND id = %s",
            (new, new, store_id, old),
        )
        for table in ("chunks", "keyword_chunks"):
            statement = "UPDATE {} SET document_id = %s WHERE store_id = %s AND document_id = %s"
            conn.execute(sql.SQL(statement).format(sql.Identifier(table)), (new, store_id, old))


def embedded_owner_dsn(pgdata: Path) -> str:
    """The owner's connection to the embedded PostgreSQL running on `pgdata`, by its socket."""
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    port, socket_dir = lines[3], lines[4]
    return f"postgresql://postgres@/postgres?host={socket_dir}&port={port}"
