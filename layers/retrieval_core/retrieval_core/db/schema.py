"""What a database holds of ours: the schema version, and the pgvector extension this service needs."""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

import psycopg

from retrieval_core.exceptions import PgvectorVersionError

logger = logging.getLogger(__name__)

# Iterative index scans (hnsw.iterative_scan), which filtered searches rely on, came with pgvector 0.8.
PGVECTOR_MINIMUM: tuple[int, ...] = (0, 8)

_LEADING_VERSION = re.compile(r"\d+(?:\.\d+)*")


def schema_version(conn: psycopg.Connection[Any]) -> int | None:
    """The newest migration applied; None when the database has no schema (no schema_migrations)."""
    row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if row is None or not row[0]:
        return None
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def pgvector_version(conn: psycopg.Connection[Any]) -> str | None:
    """The installed version of the `vector` extension; None when it is not installed."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    return None if row is None else str(row[0])


def available_pgvector_version(conn: psycopg.Connection[Any]) -> str | None:
    """The version CREATE EXTENSION vector (or ALTER EXTENSION vector UPDATE) would install; None when
    the server does not ship pgvector."""
    row = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return None if row is None else str(row[0])


def version_tuple(version: str) -> tuple[int, ...]:
    """`"0.8.5"` -> (0, 8, 5); a suffix such as `-dev` is ignored; () when no number leads."""
    match = _LEADING_VERSION.match(version.strip())
    return tuple(int(part) for part in match.group().split(".")) if match else ()


def at_least(version: str, minimum: tuple[int, ...]) -> bool:
    """True when `version` is `minimum` or newer (missing parts count as 0: "0.8" == "0.8.0")."""
    found = version_tuple(version)
    if not found:
        return False
    width = max(len(found), len(minimum))
    return found + (0,) * (width - len(found)) >= minimum + (0,) * (width - len(minimum))


def pgvector_plan(
    installed: str | None, available: str | None, minimum: tuple[int, ...] = PGVECTOR_MINIMUM
) -> Literal["ready", "create", "update"]:
    """What the migrator does about pgvector, or PgvectorVersionError when no version it can reach will do.

    ready: installed and new enough. create: not installed; the first migration creates it.
    update: installed but too old while the server ships a new enough one (ALTER EXTENSION ... UPDATE).
    """
    needed = ".".join(map(str, minimum))
    if installed is not None and at_least(installed, minimum):
        return "ready"
    if available is None:
        raise PgvectorVersionError(
            f"this PostgreSQL server does not ship the pgvector extension; this service needs pgvector "
            f"{needed} or newer (iterative index scans): use a PostgreSQL with pgvector {needed}+ "
            "(on RDS and Aurora: a minor version that ships it)"
        )
    if not at_least(available, minimum):
        found = f"pgvector {installed} is installed and " if installed else ""
        raise PgvectorVersionError(
            f"{found}the newest pgvector this PostgreSQL server ships is {available}; this service "
            f"needs pgvector {needed} or newer (iterative index scans): upgrade PostgreSQL to a minor "
            f"version that ships pgvector {needed}+, then deploy again or run `retrieval migrate`"
        )
    return "create" if installed is None else "update"


def ensure_pgvector(conn: psycopg.Connection[Any], minimum: tuple[int, ...] = PGVECTOR_MINIMUM) -> None:
    """Refuse an old pgvector; update an installed old one when the server ships a new enough one.

    Run inside the migration's transaction: ALTER EXTENSION is transactional, so a failed run leaves
    the extension as it was.
    """
    installed = pgvector_version(conn)
    plan = pgvector_plan(installed, available_pgvector_version(conn), minimum)
    if plan == "update":
        # Safe: pgvector's update scripts change functions, operators and type options only; stored
        # vectors and indexes stay valid. Only when needed: it takes ownership of the extension.
        conn.execute("ALTER EXTENSION vector UPDATE")
        logger.info("updated the pgvector extension from %s to %s", installed, pgvector_version(conn))


def require_pgvector(conn: psycopg.Connection[Any], minimum: tuple[int, ...] = PGVECTOR_MINIMUM) -> str:
    """The installed pgvector version, checked after migrating; PgvectorVersionError when absent or old."""
    installed = pgvector_version(conn)
    if installed is None or not at_least(installed, minimum):
        needed = ".".join(map(str, minimum))
        raise PgvectorVersionError(
            f"after migrating, pgvector is {installed or 'not installed'}; this service needs pgvector "
            f"{needed} or newer (iterative index scans)"
        )
    return installed
