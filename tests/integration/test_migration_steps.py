"""The runner's bookkeeping against a database of each test's own: checksums of applied versions, steps
outside a transaction, and a run that resumes after running out of time."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from retrieval_core.db.migrations.runner import run_migrations
from retrieval_core.db.migrations.steps import MIGRATIONS, SCHEMA_VERSION, Migration
from retrieval_core.db.schema import schema_version
from retrieval_core.exceptions import MigrationChecksumError, MigrationError, MigrationTimeoutError

ALL_VERSIONS = [version for version, _, _ in MIGRATIONS]
NEXT = SCHEMA_VERSION + 1

# A concurrent index build: PostgreSQL refuses it inside a transaction block.
CONCURRENT_INDEX = (
    NEXT,
    "documents by title, built concurrently",
    "-- documents by title, built concurrently\n"
    "-- migrate: no-transaction\n"
    "CREATE INDEX CONCURRENTLY IF NOT EXISTS documents_title ON documents (title);\n"
    "-- a semicolon in a comment; and in a string:\n"
    "COMMENT ON INDEX documents_title IS 'by title; for the tests';\n",
)


@pytest.fixture()
def dsn(postgres_dsn: str) -> Iterator[str]:
    """An empty database of this test's own on the session's server (advisory locks are per database)."""
    name = f"migrations_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield make_conninfo(postgres_dsn, dbname=name)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def checksums(dsn: str) -> dict[int, str | None]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return dict(
            conn.execute("SELECT version, checksum FROM schema_migrations ORDER BY version").fetchall()
        )


def index_is_valid(dsn: str, name: str) -> bool | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            (name,),
        ).fetchone()
    return None if row is None else bool(row[0])


def test_each_applied_version_is_recorded_with_the_checksum_of_its_file(dsn: str) -> None:
    run_migrations(dsn)
    assert checksums(dsn) == {m.version: m.checksum for m in MIGRATIONS}
    assert all(len(m.checksum) == 64 for m in MIGRATIONS)


def test_a_database_migrated_before_checksums_gets_them_on_its_first_run(dsn: str) -> None:
    run_migrations(dsn, migrations=MIGRATIONS[:4])
    # As the runner left it before checksums were kept: no column.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE schema_migrations DROP COLUMN checksum")
    result = run_migrations(dsn)
    assert result.applied == ALL_VERSIONS[4:]
    assert checksums(dsn) == {m.version: m.checksum for m in MIGRATIONS}


def test_an_applied_migration_whose_file_was_edited_is_refused_and_nothing_is_applied(dsn: str) -> None:
    run_migrations(dsn)
    recorded = checksums(dsn)
    version, description, sql = MIGRATIONS[1]
    edited = Migration(version, description, sql + "-- an afterthought\n")
    added = (NEXT, "a later table", "-- a later table\nCREATE TABLE later_marker ();")
    with pytest.raises(MigrationChecksumError) as raised:
        run_migrations(dsn, migrations=[MIGRATIONS[0], edited, *MIGRATIONS[2:], added])
    assert raised.value.code == "migration_checksum_mismatch" and raised.value.status_code == 500
    assert raised.value.message.startswith(
        f"migration 2 ({description}) was edited after this database applied it: the SHA-256 recorded then "
        "differs from the file's. An applied migration never changes"
    )
    assert raised.value.details == {"versions": [2]}
    assert checksums(dsn) == recorded
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema_version(conn) == SCHEMA_VERSION
    # Unedited, the same run goes on.
    assert run_migrations(dsn, migrations=[*MIGRATIONS, added]).applied == [NEXT]


def test_a_checksum_recorded_before_an_edit_still_refuses_it_when_only_the_edit_runs(dsn: str) -> None:
    run_migrations(dsn, migrations=MIGRATIONS[:2])
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = NULL")
    # The first run records the checksums of the files as they are now...
    assert run_migrations(dsn, migrations=MIGRATIONS[:2]).applied == []
    version, description, sql = MIGRATIONS[0]
    # ...so an edit made after it is refused.
    with pytest.raises(MigrationChecksumError, match=r"^migration 1 \("):
        run_migrations(dsn, migrations=[Migration(version, description, sql.replace("\n", "\n\n", 1))])


def test_a_step_marked_no_transaction_runs_outside_one_statement_by_statement(dsn: str) -> None:
    result = run_migrations(dsn, migrations=[*MIGRATIONS, CONCURRENT_INDEX])
    assert result.applied == [*ALL_VERSIONS, NEXT] and result.schema_version == NEXT
    assert index_is_valid(dsn, "documents_title") is True
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT obj_description('documents_title'::regclass, 'pg_class')").fetchone()
    assert row == ("by title; for the tests",)
    assert checksums(dsn)[NEXT] == Migration(*CONCURRENT_INDEX).checksum
    assert run_migrations(dsn, migrations=[*MIGRATIONS, CONCURRENT_INDEX]).applied == []


def test_without_the_marker_a_concurrent_index_build_is_refused_inside_the_transaction(dsn: str) -> None:
    version, description, sql = CONCURRENT_INDEX
    unmarked = (version, description, sql.replace("-- migrate: no-transaction\n", ""))
    with pytest.raises(MigrationError, match=r"SQLSTATE 25001, ActiveSqlTransaction\); it was rolled back: "):
        run_migrations(dsn, migrations=[*MIGRATIONS, unmarked])
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema_version(conn) is None


def test_a_run_out_of_time_outside_a_transaction_keeps_what_it_committed_and_the_next_run_goes_on(
    dsn: str,
) -> None:
    # Steps outside a transaction between ordinary ones: the ordinary ones before it commit first.
    pause = (
        NEXT,
        "a marker, then a pause",
        "-- a marker, then a pause\n"
        "-- migrate: no-transaction\n"
        "CREATE TABLE IF NOT EXISTS outside_marker ();\n"
        "SELECT pg_sleep(coalesce((SELECT max(seconds) FROM migration_pause), 0));\n",
    )
    after = (NEXT + 1, "a table after the pause", "-- a table after the pause\nCREATE TABLE after_marker ();")
    migrations = [*MIGRATIONS, pause, after]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE migration_pause (seconds float8); INSERT INTO migration_pause VALUES (60)")
    with pytest.raises(MigrationTimeoutError) as raised:
        run_migrations(dsn, time_budget_s=4, migrations=migrations)
    committed = ", ".join(map(str, ALL_VERSIONS))
    assert raised.value.message.startswith(
        f"the schema migration ran out of its 4 s while applying migration {NEXT} (a marker, then a pause), "
        f"statement 2 of 2, outside a transaction; migration {NEXT} runs outside a transaction: the "
        "statements of it that finished stay, and the next run runs it again from its start; migrations "
        f"{committed} of this run were committed before it and stay applied. A migration that takes this "
        "long must run outside Lambda"
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert schema_version(conn) == SCHEMA_VERSION
        assert conn.execute("SELECT to_regclass('outside_marker') IS NOT NULL").fetchone() == (True,)
        applied_at = conn.execute("SELECT max(applied_at) FROM schema_migrations").fetchone()
        conn.execute("DELETE FROM migration_pause")
        # The lock was released: another migrator is not kept waiting by the failed run.
        assert conn.execute("SELECT pg_try_advisory_lock(7351902114)").fetchone() == (True,)
        conn.execute("SELECT pg_advisory_unlock(7351902114)")

    result = run_migrations(dsn, time_budget_s=30, migrations=migrations)
    assert result.applied == [NEXT, NEXT + 1] and result.schema_version == NEXT + 1
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT version FROM schema_migrations WHERE applied_at <= %s", applied_at
        ).fetchall()
    assert [version for (version,) in rows] == ALL_VERSIONS
