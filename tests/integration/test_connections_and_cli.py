"""Lambda-style connection reuse and recovery, and the `retrieval` command."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from retrieval_core.cli.main import main
from retrieval_core.db.connection import SingleConnection
from retrieval_core.db.migrations.steps import SCHEMA_VERSION
from retrieval_core.db.schema import available_pgvector_version
from tests.servers import free_port


def backend_pid(database: SingleConnection) -> int:
    with database.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def test_single_connection_is_reused_and_reopened_after_a_restart(private_postgres) -> None:  # type: ignore[no-untyped-def]
    database = SingleConnection(private_postgres.get_uri(), connect_timeout_s=2, statement_timeout_ms=5000)
    first = backend_pid(database)
    assert backend_pid(database) == first  # one connection per container, reused across invocations

    private_postgres.stop()
    with pytest.raises(psycopg.OperationalError):
        backend_pid(database)
    private_postgres.ensure_postgres_running()

    assert backend_pid(database) != first  # re-opened on the next use, no restart of the process
    database.close()


def test_statement_timeout_bounds_every_query(private_postgres) -> None:  # type: ignore[no-untyped-def]
    database = SingleConnection(private_postgres.get_uri(), connect_timeout_s=2, statement_timeout_ms=200)
    with pytest.raises(psycopg.errors.QueryCanceled), database.connection() as conn:
        conn.execute("SELECT pg_sleep(2)")
    database.close()


def test_cli_ingests_lists_and_deletes(
    sample_store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "guide.md").write_text("# Guide\n\nRotate the API keys every ninety days.", "utf-8")
    (tmp_path / "faq.txt").write_text("Questions and answers about expenses.", "utf-8")

    assert main(["ingest", str(tmp_path), "--store", "cli-docs", "--no-progress"]) == 0
    assert (
        "added 2, updated 0, unchanged 0, deleted 0, skipped 0, failed 0: 2 documents written (2 chunks)"
        in (capsys.readouterr().out)
    )

    assert main(["ingest", str(tmp_path), "--store", "cli-docs", "--no-progress"]) == 0
    assert "added 0, updated 0, unchanged 2, deleted 0, skipped 0, failed 0: 0 documents written" in (
        capsys.readouterr().out
    )

    assert main(["stores"]) == 0
    listing = capsys.readouterr().out
    assert "cli-docs\tcli-docs\tall-MiniLM-L6-v2\t384\t2 chunks" in listing
    assert main(["stores", "list"]) == 0
    assert capsys.readouterr().out == listing

    assert main(["delete", "--store", "cli-docs", "guide.md", "nope.md"]) == 0
    assert "deleted 1 document from store 'cli-docs': guide.md; not found: nope.md" in capsys.readouterr().out
    assert main(["delete", "--store", "cli-docs", "guide.md"]) == 1  # nothing left to delete

    assert main(["delete", "--store", "no-such-store", "x"]) == 2
    assert "store 'no-such-store' not found" in capsys.readouterr().err


def test_cli_reports_a_missing_path(sample_store, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    assert main(["ingest", str(tmp_path / "absent"), "--store", "cli-docs", "--no-progress"]) == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_cli_migrate_applies_what_is_missing_even_with_auto_migrate_off(
    private_postgres, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    from retrieval_core.settings import get_settings

    dsn = private_postgres.get_uri()
    with psycopg.connect(dsn) as conn:
        pgvector = available_pgvector_version(conn)
    monkeypatch.setenv("DATABASE_URL", dsn)
    monkeypatch.setenv("AUTO_MIGRATE", "false")  # as in a deployed stack's environment
    get_settings.cache_clear()
    try:
        assert main(["migrate"]) == 0
        assert capsys.readouterr().out == (
            f"applied migrations {', '.join(str(v) for v in range(1, SCHEMA_VERSION + 1))}: "
            f"schema version {SCHEMA_VERSION}, pgvector {pgvector}\n"
        )
        assert main(["migrate"]) == 0
        assert (
            capsys.readouterr().out
            == f"schema is up to date: schema version {SCHEMA_VERSION}, pgvector {pgvector}\n"
        )

        monkeypatch.setenv(
            "DATABASE_URL", f"postgresql://retrieval:Tr0ub4dor-3@127.0.0.1:{free_port()}/postgres"
        )
        get_settings.cache_clear()
        assert main(["migrate"]) == 2
        err = capsys.readouterr().err
        assert (
            err.startswith("error: database unavailable while migrating the schema")
            and "Tr0ub4dor" not in err
        )
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
