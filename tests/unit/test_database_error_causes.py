"""Driver errors become errors that name their cause: by SQLSTATE, never by message text
the caller could see. The integration tier (test_bounded_cost.py, test_database_causes.py) produces the real
ones; here, states a test cannot produce on a shared server (a full disk, a wrong password)."""

from __future__ import annotations

import logging

import psycopg
import psycopg.errors
import pytest

from retrieval_core.db.errors import database_errors
from retrieval_core.exceptions import RetrievalError


def raised_by(error: psycopg.Error) -> RetrievalError:
    with pytest.raises(RetrievalError) as caught, database_errors("searching"):
        raise error
    return caught.value


@pytest.mark.parametrize(
    ("error", "status", "code", "retry_after"),
    [
        (
            psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
            503,
            "query_timeout",
            1,
        ),
        (
            psycopg.errors.DiskFull("could not extend file: No space left on device"),
            507,
            "database_storage_full",
            None,
        ),
        (
            psycopg.errors.InvalidPassword("password authentication failed"),
            500,
            "database_misconfigured",
            None,
        ),
        (
            psycopg.errors.InvalidCatalogName('database "prod" does not exist'),
            500,
            "database_misconfigured",
            None,
        ),
        (
            psycopg.errors.InsufficientPrivilege("permission denied for table chunks"),
            500,
            "database_misconfigured",
            None,
        ),
        (
            psycopg.errors.OutOfMemory("out of shared memory"),
            503,
            "database_lock_table_full",
            1,
        ),
        (
            psycopg.errors.OutOfMemory("out of memory"),
            503,
            "database_resources_exhausted",
            1,
        ),
        (
            psycopg.errors.InsufficientResources("insufficient resources"),
            503,
            "database_resources_exhausted",
            1,
        ),
        (psycopg.errors.DeadlockDetected("deadlock detected"), 409, "database_deadlock", 1),
        (psycopg.errors.SerializationFailure("could not serialize access"), 409, "write_conflict", 1),
        (
            psycopg.errors.ForeignKeyViolation("violates foreign key constraint"),
            409,
            "concurrently_deleted",
            None,
        ),
        (psycopg.errors.RaiseException("poisoned chunk"), 500, "database_error", None),
        (psycopg.errors.LockNotAvailable("could not obtain lock"), 500, "database_error", None),
        (
            psycopg.errors.ConfigurationLimitExceeded("configuration limit exceeded"),
            503,
            "database_resources_exhausted",
            1,
        ),
        (
            psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
            500,
            "database_unavailable",
            5,
        ),
    ],
)
def test_each_sqlstate_has_its_own_code(
    error: psycopg.Error, status: int, code: str, retry_after: int | None
) -> None:
    ours = raised_by(error)
    assert (ours.status_code, ours.code, ours.retry_after_s) == (status, code, retry_after)
    assert "searching" in ours.message


@pytest.mark.parametrize(
    ("server_message", "sqlstate"),
    [
        ('FATAL:  password authentication failed for user "svc"', "28P01"),
        ('FATAL:  no pg_hba.conf entry for host "10.0.0.1", user "svc", database "prod"', "28000"),
        ('FATAL:  role "svc" does not exist', "28000"),
        ('FATAL:  database "prod" does not exist', "3D000"),
    ],
)
def test_a_refused_connection_is_misconfigured_and_logs_its_sqlstate_never_the_dsn(
    server_message: str, sqlstate: str, caplog: pytest.LogCaptureFixture
) -> None:
    # libpq gives a refused connection no SQLSTATE: only the server's message, which names user and host.
    refused = psycopg.OperationalError(
        f'connection failed: connection to server at "db.internal" failed: {server_message}'
    )
    with caplog.at_level(logging.DEBUG, logger="retrieval_core.db.errors"):
        ours = raised_by(refused)
    assert ours.code == "database_misconfigured" and ours.status_code == 500
    assert "svc" not in ours.message and "db.internal" not in ours.message
    assert f"SQLSTATE {sqlstate}" in caplog.text
    assert "svc" not in caplog.text and "db.internal" not in caplog.text


def test_a_pool_that_could_not_connect_keeps_the_reason_as_its_cause() -> None:
    refused = psycopg.OperationalError('connection failed: FATAL:  database "prod" does not exist')
    try:
        raise psycopg.OperationalError("no connection to PostgreSQL could be opened") from refused
    except psycopg.OperationalError as pooled:
        assert raised_by(pooled).code == "database_misconfigured"


def test_an_unreachable_server_stays_an_outage_with_retry_after() -> None:
    down = psycopg.OperationalError(
        'connection failed: connection to server at "db.internal" failed: Connection refused'
    )
    ours = raised_by(down)
    assert (ours.status_code, ours.code, ours.retry_after_s) == (500, "database_unavailable", 5)


def test_out_of_shared_memory_names_the_lock_table_not_an_unreachable_server() -> None:
    ours = raised_by(psycopg.errors.OutOfMemory("out of shared memory"))
    assert "SQLSTATE 53200" in ours.message and "lock table" in ours.message
    assert "max_locks_per_transaction" in ours.message and "could not reach" not in ours.message
    assert ours.details == {"operation": "searching", "sqlstate": "53200"}


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.ForeignKeyViolation("violates foreign key constraint"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.OutOfMemory("out of shared memory"),
        psycopg.errors.RaiseException("poisoned chunk"),
    ],
)
def test_only_a_connection_failure_says_postgresql_could_not_be_reached(error: psycopg.Error) -> None:
    ours = raised_by(error)
    assert ours.code != "database_unavailable" and "could not reach" not in ours.message
    assert "searching" in ours.message  # the operation it happened in
