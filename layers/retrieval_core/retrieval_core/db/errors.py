"""Turn driver errors into errors a caller may see: no DSN, no password, no stack trace."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from ..exceptions import DatabaseOverloadedError, DatabaseUnavailableError, SchemaObjectMissingError
from .migrations import SCHEMA_VERSION

TOO_MANY_CONNECTIONS = "53300"
# undefined_table, undefined_column: the schema lacks what the code queries (a migration has not run).
SCHEMA_BEHIND = frozenset({"42P01", "42703"})
# libpq gives no SQLSTATE for a refused connection, only the server's message: these are 53300's.
_TOO_MANY_CONNECTIONS_MESSAGES = ("too many clients", "too many connections", "remaining connection slots")


@contextmanager
def database_errors(operation: str) -> Iterator[None]:
    """Re-raise psycopg failures during `operation` as errors of ours.

    Every connection busy (the pool's or the server's): DatabaseOverloadedError. A missing table or
    column: SchemaObjectMissingError. Anything else: DatabaseUnavailableError.
    """
    try:
        yield
    except psycopg.OperationalError as exc:
        # Before the generic case: PoolTimeout and a refused connection are OperationalErrors too.
        if _pool_exhausted(exc) or _too_many_connections(exc):
            raise DatabaseOverloadedError(
                f"every database connection is busy while {operation}: retry shortly",
                {"operation": operation},
            ) from exc
        raise DatabaseUnavailableError(
            f"database unavailable while {operation}: could not reach PostgreSQL or the connection was lost",
            {"operation": operation},
        ) from exc
    except psycopg.Error as exc:
        if exc.sqlstate in SCHEMA_BEHIND:
            raise SchemaObjectMissingError(SCHEMA_VERSION) from exc
        # Only the SQLSTATE travels: driver messages can quote hosts, users and values.
        raise DatabaseUnavailableError(
            f"database error while {operation} (SQLSTATE {exc.sqlstate or 'unknown'})",
            {"operation": operation, "sqlstate": exc.sqlstate},
        ) from exc


def _pool_exhausted(exc: psycopg.OperationalError) -> bool:
    # Only a process that built a pool has imported psycopg_pool (kept out of Lambda's cold start), and
    # PooledConnections lets a PoolTimeout through only when every connection is lent out.
    pool = sys.modules.get("psycopg_pool")
    return pool is not None and isinstance(exc, pool.PoolTimeout)


def _too_many_connections(exc: psycopg.OperationalError) -> bool:
    if exc.sqlstate == TOO_MANY_CONNECTIONS:
        return True
    # Matched, never quoted: the message names the host and the role.
    message = str(exc).lower()
    return any(marker in message for marker in _TOO_MANY_CONNECTIONS_MESSAGES)
