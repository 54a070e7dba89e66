"""Turn driver errors into errors a caller may see: no DSN, no password, no stack trace."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from ..exceptions import DatabaseUnavailableError


@contextmanager
def database_errors(operation: str) -> Iterator[None]:
    """Re-raise psycopg failures during `operation` as DatabaseUnavailableError."""
    try:
        yield
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailableError(
            f"database unavailable while {operation}: could not reach PostgreSQL or the connection was lost",
            {"operation": operation},
        ) from exc
    except psycopg.Error as exc:
        # Only the SQLSTATE travels: driver messages can quote hosts, users and values.
        raise DatabaseUnavailableError(
            f"database error while {operation} (SQLSTATE {exc.sqlstate or 'unknown'})",
            {"operation": operation, "sqlstate": exc.sqlstate},
        ) from exc
