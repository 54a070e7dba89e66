"""Turn driver errors into errors a caller may see: no DSN, no password, no stack trace."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.exceptions import (
    ConcurrentlyDeletedError,
    DatabaseLockTableFullError,
    DatabaseMisconfiguredError,
    DatabaseOverloadedError,
    DatabaseResourcesExhaustedError,
    DatabaseStatementError,
    DatabaseStorageFullError,
    DatabaseUnavailableError,
    DeadlockError,
    QueryTimeoutError,
    RetrievalError,
    SchemaObjectMissingError,
    TransactionConflictError,
)

logger = logging.getLogger(__name__)

TOO_MANY_CONNECTIONS = "53300"
QUERY_CANCELED = "57014"  # statement_timeout (or a cancel request)
DISK_FULL = "53100"
# Class 53 but for disk (53100) and connections (53300): insufficient_resources, out_of_memory ("out of
# shared memory", the lock table, has its own error) and configuration_limit_exceeded.
RESOURCES_EXHAUSTED = {
    "53000": "insufficient resources",
    "53200": "out of memory",
    "53400": "a configured limit exceeded",
}
# invalid_authorization_specification (28000, 28P01: wrong user or password), invalid_catalog_name (3D000:
# no such database), insufficient_privilege (42501: the role may not use it).
MISCONFIGURED_CLASSES = ("28", "3D")
MISCONFIGURED_STATES = frozenset({"42501"})
# A connection refused at start-up carries no SQLSTATE in libpq, only the server's message. These are
# the server's (English) messages of the states above; matched, never quoted (they name the role).
_CONNECT_MESSAGES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("password authentication failed",), "28P01"),
    (("no pg_hba.conf entry",), "28000"),
    (("FATAL:  role ", "does not exist"), "28000"),
    (("FATAL:  database ", "does not exist"), "3D000"),
    (("permission denied for database",), "42501"),
    # A full lock table refuses new connections too (each takes a lock at start-up).
    (("FATAL:  out of shared memory",), "53200"),
    (("FATAL:  out of memory",), "53200"),
)
# undefined_table, undefined_column: the schema lacks what the code queries (a migration has not run).
SCHEMA_BEHIND = frozenset({"42P01", "42703"})
DEADLOCK = "40P01"
SERIALIZATION_FAILURE = "40001"
FOREIGN_KEY_VIOLATION = "23503"  # a row referred to was deleted by a concurrent transaction
# The connection itself failed or was ended (class 08; 57P01-57P03: the server shut down or is starting).
# Any other SQLSTATE comes from a server that answered.
CONNECTION_LOST_CLASSES = ("08",)
CONNECTION_LOST_STATES = frozenset({"57P01", "57P02", "57P03"})
# libpq gives no SQLSTATE for a refused connection, only the server's message: these are 53300's.
_TOO_MANY_CONNECTIONS_MESSAGES = ("too many clients", "too many connections", "remaining connection slots")


@contextmanager
def database_errors(operation: str) -> Iterator[None]:
    """Re-raise psycopg failures during `operation` as errors of ours.

    Every connection busy (the pool's or the server's): DatabaseOverloadedError. A statement timeout:
    QueryTimeoutError. Credentials or database refused: DatabaseMisconfiguredError. Out of disk:
    DatabaseStorageFullError. A full lock table: DatabaseLockTableFullError; out of memory or another
    limit: DatabaseResourcesExhaustedError. A missing table or column: SchemaObjectMissingError. A
    deadlock or serialization failure: DeadlockError, TransactionConflictError (writers retry them,
    `again_after_conflict`). A row deleted under the statement: ConcurrentlyDeletedError. No
    connection, or one lost: DatabaseUnavailableError. Any other SQLSTATE: DatabaseStatementError.
    The SQLSTATE is logged (the driver's message is not: it can name the host, the role and values).
    """
    try:
        yield
    except psycopg.Error as exc:
        sqlstate = sqlstate_of(exc)
        error = classify(exc, sqlstate, operation)
        # Busy, slow or behind: the caller is told; an unusable database is for the operator's eyes, and
        # so is a server out of locks or memory (a capacity setting to raise).
        level = logging.DEBUG
        if isinstance(error, DatabaseUnavailableError):
            level = logging.ERROR
        elif isinstance(error, DatabaseResourcesExhaustedError):
            level = logging.WARNING
        logger.log(
            level,
            "database error while %s: SQLSTATE %s (%s)",
            operation,
            sqlstate or "none",
            type(exc).__name__,
        )
        raise error from exc


def sqlstate_of(exc: psycopg.Error) -> str | None:
    """The error's SQLSTATE; for a connection refused at start-up, the one its server message stands for."""
    if exc.sqlstate:
        return exc.sqlstate
    # A pool that could not open a connection keeps the reason (db.connection.PooledConnections).
    cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else None
    if cause is not None and cause is not exc:
        return sqlstate_of(cause)
    message = str(exc)
    return next((state for markers, state in _CONNECT_MESSAGES if all(m in message for m in markers)), None)


def classify(exc: psycopg.Error, sqlstate: str | None, operation: str) -> RetrievalError:
    """The error of ours that `exc` (with `sqlstate`) stands for."""
    details = {"operation": operation}
    if sqlstate == QUERY_CANCELED:
        return QueryTimeoutError(
            f"the database did not finish {operation} within the statement timeout: retry, or narrow "
            "the request (a search: fewer terms, a smaller similarityTopK; a write: fewer records)",
            details,
        )
    concurrent = _concurrency_error(sqlstate, operation)
    if concurrent is not None:
        return concurrent
    if sqlstate is not None and (sqlstate[:2] in MISCONFIGURED_CLASSES or sqlstate in MISCONFIGURED_STATES):
        return DatabaseMisconfiguredError(
            f"PostgreSQL refused this service's credentials or database while {operation}: check "
            "DATABASE_URL, or DATABASE_HOST, DATABASE_NAME and the credentials secret",
            details,
        )
    if sqlstate == DISK_FULL:
        return DatabaseStorageFullError(
            f"the database is out of disk space while {operation}: free or add storage", details
        )
    if sqlstate == "53200" and _lock_table_full(exc):
        return DatabaseLockTableFullError(
            f"PostgreSQL's lock table is full while {operation} (SQLSTATE 53200, out of shared memory): "
            "retry shortly; if it lasts, lower the concurrency or raise the server's "
            "max_locks_per_transaction",
            {"operation": operation, "sqlstate": sqlstate},
        )
    if sqlstate in RESOURCES_EXHAUSTED:
        return DatabaseResourcesExhaustedError(
            f"PostgreSQL ran out of resources while {operation} (SQLSTATE {sqlstate}: "
            f"{RESOURCES_EXHAUSTED[sqlstate]}): retry shortly; if it lasts, lower the concurrency or raise "
            "the server's limit",
            {"operation": operation, "sqlstate": sqlstate},
        )
    if isinstance(exc, psycopg.OperationalError):
        # Before the generic case: PoolTimeout and a refused connection are OperationalErrors too.
        if _pool_exhausted(exc) or _too_many_connections(exc):
            return DatabaseOverloadedError(
                f"every database connection is busy while {operation}: retry shortly", details
            )
        if sqlstate is None or sqlstate[:2] in CONNECTION_LOST_CLASSES or sqlstate in CONNECTION_LOST_STATES:
            return DatabaseUnavailableError(
                f"database unavailable while {operation}: could not reach PostgreSQL or the connection "
                "was lost",
                details,
            )
    if sqlstate in SCHEMA_BEHIND:
        return SchemaObjectMissingError(SCHEMA_VERSION)
    # Only the SQLSTATE travels: driver messages can quote hosts, users and values.
    return DatabaseStatementError(
        f"PostgreSQL refused a statement while {operation} (SQLSTATE {sqlstate or 'unknown'})",
        {"operation": operation, "sqlstate": sqlstate},
    )


def _concurrency_error(sqlstate: str | None, operation: str) -> RetrievalError | None:
    """The error of a statement that lost a race with a concurrent transaction; None for other states."""
    details = {"operation": operation, "sqlstate": sqlstate}
    if sqlstate == DEADLOCK:
        return DeadlockError(
            f"PostgreSQL aborted {operation} to break a deadlock with a concurrent transaction "
            f"(SQLSTATE {DEADLOCK}); writes go again within the request's deadline before this is "
            "answered: retry the request",
            details,
        )
    if sqlstate == SERIALIZATION_FAILURE:
        return TransactionConflictError(
            f"PostgreSQL could not serialise {operation} with a concurrent transaction "
            f"(SQLSTATE {SERIALIZATION_FAILURE}): retry the request",
            details,
        )
    if sqlstate == FOREIGN_KEY_VIOLATION:
        return ConcurrentlyDeletedError(
            f"what {operation} refers to (its store or document) was deleted by a concurrent request "
            f"(SQLSTATE {FOREIGN_KEY_VIOLATION})",
            details,
        )
    return None


def _lock_table_full(exc: psycopg.Error) -> bool:
    # 53200 is any out_of_memory; the lock table's is "out of shared memory", its hint naming
    # max_locks_per_transaction. Matched, never quoted.
    # A pool that could not open a connection keeps the server's refusal as the cause.
    cause = exc.__cause__ if isinstance(exc.__cause__, psycopg.Error) else None
    if cause is not None and cause is not exc and _lock_table_full(cause):
        return True
    hint = getattr(exc.diag, "message_hint", None) or ""
    return "out of shared memory" in str(exc) or "max_locks_per_transaction" in hint


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
