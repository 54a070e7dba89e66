"""`schema_migrations`: which versions a database has, and the checksum of each as it was applied.

The runner creates and extends this table itself (not a numbered migration), so that checksums came
without a new schema version: a database migrated before they were kept gains the column on its first
run and gets the checksums of its applied versions recorded then.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from retrieval_core.db.migrations.steps import Migration
from retrieval_core.exceptions import MigrationChecksumError

_CREATE_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
                       version integer PRIMARY KEY,
                       name text NOT NULL,
                       applied_at timestamptz NOT NULL DEFAULT now(),
                       checksum text)"""
_HAS_CHECKSUM = """SELECT EXISTS (SELECT 1 FROM pg_attribute
                                  WHERE attrelid = 'schema_migrations'::regclass
                                      AND attname = 'checksum' AND NOT attisdropped)"""


def applied_checksums(conn: psycopg.Connection[Any]) -> dict[int, str | None]:
    """Applied version -> its recorded checksum (None: applied before checksums were kept).

    Creates the table, or adds its checksum column, when missing. The column is looked up first:
    ALTER TABLE would lock the table against readers (health checks) until the run commits.
    """
    conn.execute(_CREATE_TABLE)
    row = conn.execute(_HAS_CHECKSUM).fetchone()
    if row is None or not row[0]:
        conn.execute("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text")
    return {
        int(version): checksum
        for version, checksum in conn.execute("SELECT version, checksum FROM schema_migrations")
    }


def check_checksums(
    conn: psycopg.Connection[Any], migrations: Sequence[Migration], recorded: dict[int, str | None]
) -> None:
    """Refuse when an applied version's file changed; record the checksums not recorded yet."""
    edited = [m for m in migrations if recorded.get(m.version) not in (None, m.checksum)]
    if edited:
        versions = [m.version for m in edited]
        named = ", ".join(f"{m.version} ({m.description})" for m in edited)
        several = len(edited) > 1
        raise MigrationChecksumError(
            f"migration{'s' if several else ''} {named} {'were' if several else 'was'} edited after this "
            f"database applied {'them' if several else 'it'}: the SHA-256 recorded then differs from the "
            "file's. An applied migration never changes: restore the file as it was and put the change in "
            "a new version. Nothing was applied",
            {"versions": versions},
        )
    unrecorded = [m for m in migrations if m.version in recorded and recorded[m.version] is None]
    if unrecorded:
        with conn.cursor() as cur:
            cur.executemany(
                "UPDATE schema_migrations SET checksum = %s WHERE version = %s",
                [(m.checksum, m.version) for m in unrecorded],
            )
        recorded.update((m.version, m.checksum) for m in unrecorded)


def record(conn: psycopg.Connection[Any], migration: Migration) -> None:
    """Record `migration` as applied, with its checksum."""
    conn.execute(
        "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
        (migration.version, migration.description, migration.checksum),
    )


def is_recorded(conn: psycopg.Connection[Any], version: int) -> bool:
    """True when `version` is recorded as applied."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = %s)", (version,)
    ).fetchone()
    return bool(row and row[0])
