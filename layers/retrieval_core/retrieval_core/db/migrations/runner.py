"""Run the migrations: lock, check the checksums, apply what is missing within a time budget.

The rules (transactions, steps outside one, resuming, checksums) are in the package docstring.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from retrieval_core.clients.retry import Deadline, backoff_delay
from retrieval_core.db.keywords import Backfill, backfill_keywords
from retrieval_core.db.migrations import bookkeeping
from retrieval_core.db.migrations.id_check import UnsafeIds, unsafe_document_ids
from retrieval_core.db.migrations.roles import RoleSetup, missing_roles_message, set_up_roles
from retrieval_core.db.migrations.statements import split_statements
from retrieval_core.db.migrations.steps import MIGRATIONS, Migration, as_migrations
from retrieval_core.db.schema import ensure_pgvector, require_pgvector, schema_version
from retrieval_core.exceptions import (
    ConfigurationError,
    DatabaseUnavailableError,
    MigrationError,
    MigrationTimeoutError,
)

logger = logging.getLogger(__name__)

# Any constant works; it only serialises concurrent migrators (pg_advisory_xact_lock, and
# pg_advisory_lock around a step outside a transaction: the two kinds conflict on one key).
MIGRATION_LOCK_KEY = 7_351_902_114
# A connection attempt or a statement is not started with less time than this left.
_MIN_ATTEMPT_S = 1.0
_CONNECT_RETRY_BASE_S = 0.5
_CONNECT_RETRY_MAX_S = 10.0
_WAITING_FOR_LOCK = "waiting for the migration lock (another migration holds it while it runs)"


@dataclass(frozen=True)
class Migrated:
    """What a migration run did and left."""

    applied: list[int]  # the versions this run applied, in order ([] when the schema was up to date)
    schema_version: int  # the database's afterwards; newer than SCHEMA_VERSION after a code rollback
    pgvector_version: str
    # The stored document ids a URL would read as a path step (the check after migrating).
    unsafe_ids: UnsafeIds = field(default_factory=lambda: UnsafeIds([], 0))


@dataclass
class _Run:
    """How far a run got: for its log line, and for saying what stays applied when it fails."""

    deadline: Deadline
    step: str = "starting"
    applied: list[int] = field(default_factory=list)  # committed, then those of the open transaction
    committed: int = 0  # how many of `applied` are committed
    outside: int | None = None  # the version being applied outside a transaction, if any

    def outcome(self, subject: str = "it") -> str:
        """What a failure now leaves, for the error message."""
        if self.outside is not None:
            left = (
                f"migration {self.outside} runs outside a transaction: the statements of it that finished "
                "stay, and the next run runs it again from its start"
            )
        elif self.committed == 0:
            return f"{subject} was rolled back: nothing of this run was applied"
        else:
            left = f"{subject} was rolled back"
        if self.committed:
            kept = ", ".join(map(str, self.applied[: self.committed]))
            several = self.committed > 1
            left += (
                f"; migration{'s' if several else ''} {kept} of this run {'were' if several else 'was'} "
                f"committed before it and {'stay' if several else 'stays'} applied"
            )
        return left


def migrate(
    conninfo: str,
    connect_timeout_s: int = 5,
    *,
    time_budget_s: float | None = None,
    roles: RoleSetup | None = None,
) -> list[int]:
    """Apply every migration not yet recorded, then set up `roles`; return the versions applied now."""
    return run_migrations(
        conninfo, connect_timeout_s=connect_timeout_s, time_budget_s=time_budget_s, roles=roles
    ).applied


def run_migrations(
    conninfo: str,
    *,
    connect_timeout_s: int = 5,
    time_budget_s: float | None = None,
    migrations: Sequence[tuple[int, str, str]] = MIGRATIONS,
    roles: RoleSetup | None = None,
) -> Migrated:
    """Apply every migration of `migrations` (version, description, sql) not yet recorded, within the budget;
    then, in the same transaction, set up the service's database roles (`roles`; None: no roles step).

    time_budget_s None: one connection attempt and no statement timeout (a long migration run by hand).
    Raises DatabaseUnavailableError when no connection could be made, PgvectorVersionError,
    MigrationChecksumError when an applied migration was edited, MigrationTimeoutError when the budget
    ran out, MigrationError when a statement failed or the roles are not ready (what is missing named).
    """
    run = _Run(Deadline(time_budget_s))
    conn = connect(conninfo, connect_timeout_s, run.deadline)
    # statement_timeout bounds each statement, and a migration is many: this bounds their sum.
    guard = _cancel_at_deadline(conn, run.deadline)
    try:
        with conn:
            pgvector, version_after = _migrate(conn, as_migrations(migrations), run, roles)
            unsafe = _unsafe_ids(conn, run)
    except psycopg.errors.QueryCanceled as exc:
        if run.deadline.budget_s is None:
            raise MigrationError(
                f"the schema migration was cancelled while {run.step} (by an operator or the server); "
                f"{run.outcome()}",
                {"step": run.step},
            ) from exc
        raise _out_of_time(run) from exc
    except psycopg.OperationalError as exc:
        raise MigrationError(
            f"the connection to PostgreSQL was lost while {run.step}; {run.outcome('the migration')}. "
            "Run it again",
            {"step": run.step, "sqlstate": exc.sqlstate},
        ) from exc
    except psycopg.Error as exc:
        # Only the SQLSTATE travels: driver messages can quote hosts, users and values.
        raise MigrationError(
            f"the schema migration failed while {run.step} (SQLSTATE {exc.sqlstate or 'unknown'}, "
            f"{type(exc).__name__}); {run.outcome()}",
            {"step": run.step, "sqlstate": exc.sqlstate},
        ) from exc
    finally:
        if guard is not None:
            guard.cancel()
    if run.applied:
        logger.info(
            "applied migrations %s; schema at version %s (pgvector %s)",
            ", ".join(map(str, run.applied)),
            version_after,
            pgvector,
        )
    return Migrated(run.applied, version_after, pgvector, unsafe)


def run_keyword_backfill(
    conninfo: str, connect_timeout_s: int = 5, *, time_budget_s: float | None = None
) -> Backfill:
    """After the migrations: index the chunks written before the keyword index existed (db/keywords.py),
    within the budget.

    Batches commit one by one, so a run cut off by its budget keeps what it did and the next run goes on.
    """
    deadline = Deadline(time_budget_s)
    with connect(conninfo, connect_timeout_s, deadline) as conn:
        return backfill_keywords(conn, deadline)


def _migrate(
    conn: psycopg.Connection[Any], migrations: list[Migration], run: _Run, roles: RoleSetup | None
) -> tuple[str, int]:
    """Transactions of ordinary steps, each followed by the step outside a transaction that stopped it,
    until none is missing; then, in the last transaction, the roles and the pgvector and schema versions."""
    while True:
        with conn.transaction():
            outside = _apply_in_transaction(conn, migrations, run)
            if outside is None:
                if roles is not None:
                    _set_up_roles(conn, migrations, run, roles)
                run.step = "checking the migrated schema"
                _bound_next_statement(conn, run)
                pgvector = require_pgvector(conn)
                version_after = schema_version(conn) or 0
                run.step = "committing"
        run.committed = len(run.applied)
        if outside is None:
            return pgvector, version_after
        _apply_outside_transaction(conn, outside, run)


def _unsafe_ids(conn: psycopg.Connection[Any], run: _Run) -> UnsafeIds:
    """The stored ids with dot segments, for the log; a check that fails or runs out of time is logged
    and fails nothing, since the schema is migrated by then."""
    run.step = "looking for document ids with '.' or '..' segments"
    try:
        with conn.transaction():
            _bound_next_statement(conn, run)
            unsafe = unsafe_document_ids(conn)
    except (psycopg.Error, MigrationTimeoutError) as exc:
        logger.warning("document ids were not checked for dot segments (%s)", type(exc).__name__)
        return UnsafeIds([], 0)
    if unsafe.count:
        logger.warning(
            "%d stored document ids hold a '.' or '..' segment, which no write accepts any more; delete them "
            "with DELETE /api/v1/stores/{store}/documents?documentId=... (docs/migrations.md): %s",
            unsafe.count,
            ", ".join(f"{store}: {document_id!r}" for store, document_id in unsafe.listed),
        )
    return unsafe


def _apply_in_transaction(
    conn: psycopg.Connection[Any], migrations: list[Migration], run: _Run
) -> Migration | None:
    """Under the lock: check pgvector and the checksums, then apply the missing steps in order up to
    the first that runs outside a transaction, which is returned (None when none is left)."""
    run.step = _WAITING_FOR_LOCK
    _bound_next_statement(conn, run)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
    run.step = "checking the pgvector extension"
    _bound_next_statement(conn, run)
    ensure_pgvector(conn)
    run.step = "checking the checksums of the applied migrations"
    recorded = bookkeeping.applied_checksums(conn)
    bookkeeping.check_checksums(conn, migrations, recorded)
    for migration in migrations:
        if migration.version in recorded:
            continue
        if migration.outside_transaction:
            return migration
        run.step = f"applying migration {migration.version} ({migration.description})"
        _bound_next_statement(conn, run)
        conn.execute(migration.sql.encode())
        bookkeeping.record(conn, migration)
        run.applied.append(migration.version)
    return None


def _set_up_roles(
    conn: psycopg.Connection[Any], migrations: list[Migration], run: _Run, roles: RoleSetup
) -> None:
    """The roles step (db/migrations/roles.py), after every numbered migration: a table added by one is
    granted in the same transaction that creates it."""
    run.step = "setting up the service's database roles"
    _bound_next_statement(conn, run)
    try:
        missing = set_up_roles(conn, roles, migrations)
    except ValueError as exc:  # the prefix: a configuration error, named by its setting
        raise ConfigurationError(str(exc)) from None
    if missing:
        raise MigrationError(
            f"{missing_roles_message(missing)}; {run.outcome()}", {"step": run.step, "missing": missing}
        )


def _apply_outside_transaction(conn: psycopg.Connection[Any], migration: Migration, run: _Run) -> None:
    """Apply `migration` statement by statement, each committing on its own, under a session lock.

    Another migrator may have applied it since this run's last transaction: it is looked up again.
    """
    run.step = _WAITING_FOR_LOCK
    _bound_next_statement(conn, run, session=True)
    conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
    try:
        if bookkeeping.is_recorded(conn, migration.version):
            return
        run.outside = migration.version
        statements = split_statements(migration.sql)
        for number, statement in enumerate(statements, start=1):
            run.step = (
                f"applying migration {migration.version} ({migration.description}), statement {number} of "
                f"{len(statements)}, outside a transaction"
            )
            _bound_next_statement(conn, run, session=True)
            conn.execute(statement.encode())
        bookkeeping.record(conn, migration)
        run.applied.append(migration.version)
        run.committed = len(run.applied)
        run.outside = None
    finally:
        _release_session(conn)


def _release_session(conn: psycopg.Connection[Any]) -> None:
    """Undo the session's timeout and lock; on a broken connection, closing it releases both."""
    try:
        conn.execute("RESET statement_timeout")
        conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
    except psycopg.Error as exc:
        logger.warning(
            "could not release the migration lock (%s); closing the connection will", type(exc).__name__
        )


def connect(conninfo: str, connect_timeout_s: int, deadline: Deadline) -> psycopg.Connection[Any]:
    """An autocommit connection; with a deadline, connection failures are retried while time is left.

    A database behind a new RDS Proxy refuses connections for a minute or two after the stack creates it.
    """
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        # `from None`: the parser's message can quote the password ("unexpected spaces found in ...").
        raise ConfigurationError(
            "the database connection string (DATABASE_URL) is malformed: check its syntax; a password "
            "with spaces or special characters must be percent-encoded"
        ) from None
    attempts = 0
    started = time.monotonic()
    while True:
        attempts += 1
        remaining = deadline.remaining_s()
        timeout_s = connect_timeout_s if remaining is None else max(1, min(connect_timeout_s, int(remaining)))
        try:
            return psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout_s)
        except psycopg.OperationalError as exc:
            if remaining is None:
                raise
            left = deadline.remaining_s() or 0.0
            if left < _MIN_ATTEMPT_S:
                raise DatabaseUnavailableError(
                    f"could not connect to PostgreSQL: {attempts} attempts in "
                    f"{time.monotonic() - started:.0f} s failed (refused, timed out or not authenticated; "
                    "the function's log has the driver's message). A new RDS Proxy can take a few "
                    "minutes to accept connections: deploy again; otherwise check DATABASE_HOST, the "
                    "security groups and the database credentials",
                    {"operation": "connecting to migrate the schema", "attempts": attempts},
                ) from exc
            # The last attempt still gets _MIN_ATTEMPT_S.
            delay = min(
                backoff_delay(attempts, _CONNECT_RETRY_BASE_S, _CONNECT_RETRY_MAX_S), left - _MIN_ATTEMPT_S
            )
            logger.warning(
                "could not connect to PostgreSQL (attempt %d, %s); retrying in %.1f s",
                attempts,
                type(exc).__name__,
                delay,
            )
            time.sleep(delay)


def _cancel_at_deadline(conn: psycopg.Connection[Any], deadline: Deadline) -> threading.Timer | None:
    """Cancel whatever `conn` runs once the deadline passes (a QueryCanceled, then a rollback)."""
    remaining = deadline.remaining_s()
    if remaining is None:
        return None

    def cancel() -> None:
        try:
            conn.cancel_safe(timeout=5)
        except psycopg.Error as exc:
            # statement_timeout still bounds the statement running now.
            logger.warning("could not cancel the migration at its deadline (%s)", type(exc).__name__)

    timer = threading.Timer(max(0.0, remaining), cancel)
    timer.daemon = True
    timer.start()
    return timer


def _bound_next_statement(conn: psycopg.Connection[Any], run: _Run, *, session: bool = False) -> None:
    """Let the next statements run at most until the deadline: those of this transaction, or with
    `session`, those run outside one (each its own transaction) until _release_session resets it."""
    remaining = run.deadline.remaining_s()
    if remaining is not None and remaining < _MIN_ATTEMPT_S:
        raise _out_of_time(run)
    # No deadline: no limit either, so that a role's default statement_timeout cannot cut a long
    # migration run by hand. Local to the transaction unless `session`: nothing outlives the run.
    timeout_ms = 0 if remaining is None else int(remaining * 1000)
    conn.execute("SELECT set_config('statement_timeout', %s, %s)", (str(timeout_ms), not session))


def _out_of_time(run: _Run) -> MigrationTimeoutError:
    return MigrationTimeoutError(
        f"the schema migration ran out of its {run.deadline.budget_s or 0:.0f} s while {run.step}; "
        f"{run.outcome()}. A migration that takes this long must run outside Lambda: run `retrieval "
        "migrate` with DATABASE_URL set, from a host that reaches the database (docs/migrations.md), then "
        "deploy again",
        {"step": run.step, "timeBudgetS": run.deadline.budget_s},
    )
