"""The migrator against a PostgreSQL of each test's own: versions, pgvector, time budget, retries, locking."""

from __future__ import annotations

import threading
import time
import traceback
from typing import Any

import psycopg
import pytest

from retrieval_core.db.migrations.runner import migrate, run_migrations
from retrieval_core.db.migrations.steps import MIGRATIONS, SCHEMA_VERSION
from retrieval_core.db.schema import (
    available_pgvector_version,
    ensure_pgvector,
    pgvector_version,
    schema_version,
)
from retrieval_core.exceptions import (
    ConfigurationError,
    DatabaseUnavailableError,
    MigrationTimeoutError,
    PgvectorVersionError,
)
from tests.servers import free_port

ALL_VERSIONS = [version for version, _, _ in MIGRATIONS]


def dsn_of(server: Any) -> str:
    return str(server.get_uri())


def tables(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {row[0] for row in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}


def test_schema_and_pgvector_versions_before_and_after_migrating(private_postgres: Any) -> None:
    dsn = dsn_of(private_postgres)
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema_version(conn) is None
        assert pgvector_version(conn) is None
        available = available_pgvector_version(conn)
    assert available is not None

    result = run_migrations(dsn)
    assert result.applied == ALL_VERSIONS and result.schema_version == SCHEMA_VERSION
    assert result.pgvector_version == available
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema_version(conn) == SCHEMA_VERSION
        assert pgvector_version(conn) == available

    again = run_migrations(dsn)
    assert again.applied == [] and again.schema_version == SCHEMA_VERSION


def test_the_pgvector_check_reads_the_servers_versions_and_refuses_below_the_minimum(
    private_postgres: Any,
) -> None:
    # The embedded server ships one pgvector (0.8.x): the refusal is shown by asking for more.
    with psycopg.connect(dsn_of(private_postgres), autocommit=True) as conn:
        available = available_pgvector_version(conn)
        ensure_pgvector(conn)  # 0.8 or newer: nothing to do, nothing created
        assert pgvector_version(conn) is None
        with pytest.raises(PgvectorVersionError) as raised:
            ensure_pgvector(conn, minimum=(99, 0))
    assert raised.value.message.startswith(
        f"the newest pgvector this PostgreSQL server ships is {available}; this service needs pgvector "
        "99.0 or newer"
    )


def test_a_run_past_its_time_budget_is_cancelled_and_rolled_back_whole(private_postgres: Any) -> None:
    dsn = dsn_of(private_postgres)
    # Each statement fits in the budget; together they do not.
    slow = (
        SCHEMA_VERSION + 1,
        "slow",
        "CREATE TABLE slow_marker (); SELECT pg_sleep(2); SELECT pg_sleep(2);",
    )
    started = time.monotonic()
    with pytest.raises(MigrationTimeoutError) as raised:
        run_migrations(dsn, time_budget_s=3, migrations=[*MIGRATIONS, slow])
    took = time.monotonic() - started
    assert 2.5 < took < 4.5
    assert raised.value.message.startswith(
        f"the schema migration ran out of its 3 s while applying migration {SCHEMA_VERSION + 1} (slow); it "
        "was rolled back: nothing of this run was applied. A migration that takes this long must run "
        "outside Lambda: run `retrieval migrate` with DATABASE_URL set, from a host that reaches the database"
    )
    # One transaction: migrations 1-5 of the same run are gone too.
    assert tables(dsn) == set()
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema_version(conn) is None


def test_a_run_waiting_for_another_migrators_lock_gives_up_at_its_deadline(private_postgres: Any) -> None:
    dsn = dsn_of(private_postgres)
    run_migrations(dsn, migrations=MIGRATIONS[:3])
    with psycopg.connect(dsn, autocommit=True) as other, other.transaction():
        other.execute("SELECT pg_advisory_xact_lock(7351902114)")
        with pytest.raises(MigrationTimeoutError, match="while waiting for the migration lock"):
            run_migrations(dsn, time_budget_s=2)
    assert run_migrations(dsn, time_budget_s=30).applied == ALL_VERSIONS[3:]


def test_connecting_is_retried_while_the_budget_lasts(
    private_postgres: Any, caplog: pytest.LogCaptureFixture
) -> None:
    dsn = dsn_of(private_postgres)
    private_postgres.stop()
    # As a new RDS Proxy does: connections refused for a while, then accepted.
    later = threading.Timer(2.0, private_postgres.ensure_postgres_running)
    later.start()
    started = time.monotonic()
    try:
        result = run_migrations(dsn, time_budget_s=30)
    finally:
        later.join()
    assert result.applied == ALL_VERSIONS
    assert time.monotonic() - started >= 2.0
    assert "could not connect to PostgreSQL (attempt 1, OperationalError); retrying in" in caplog.text


def test_connecting_gives_up_when_the_budget_is_spent(caplog: pytest.LogCaptureFixture) -> None:
    dsn = f"postgresql://retrieval:Tr0ub4dor-3@127.0.0.1:{free_port()}/postgres"
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailableError) as raised:
        run_migrations(dsn, time_budget_s=3)
    assert 1.5 < time.monotonic() - started < 3.5
    assert raised.value.message.startswith("could not connect to PostgreSQL: ")
    assert raised.value.details["attempts"] >= 3
    assert "Tr0ub4dor-3" not in raised.value.message + caplog.text


def test_without_a_budget_one_attempt_fails_with_the_drivers_error_as_before() -> None:
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError):
        migrate(f"postgresql://retrieval@127.0.0.1:{free_port()}/postgres")
    assert time.monotonic() - started < 1.5


def test_a_malformed_connection_string_is_refused_without_quoting_it() -> None:
    # libpq's own message would quote the password: 'invalid percent-encoded token: "50%off horse"'. A bare
    # "%" is refused by every libpq psycopg-binary bundles; a space only from libpq 17 (psycopg-binary 3.2.1
    # has 16), which would connect with it.
    dsn = "postgresql://retrieval:50%off horse@127.0.0.1:5432/postgres"
    with pytest.raises(ConfigurationError) as raised:
        run_migrations(dsn, time_budget_s=5)
    shown = "".join(traceback.format_exception(raised.value))
    assert "DATABASE_URL" in shown and "horse" not in shown


def test_concurrent_runs_apply_each_migration_once(private_postgres: Any) -> None:
    dsn = dsn_of(private_postgres)
    start = threading.Barrier(3)
    results: list[list[int]] = []

    def run() -> None:
        start.wait()
        results.append(run_migrations(dsn, time_budget_s=60).applied)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(results) == [[], [], ALL_VERSIONS]
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
    assert [r[0] for r in rows] == ALL_VERSIONS
