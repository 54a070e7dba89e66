"""functions/migrate invoked like Lambda with events/cfn-migrate-*.json, as CloudFormation would invoke it.

Each test has a PostgreSQL of its own. The events' ResponseURL is pointed at a local HTTP server that
records the PUT CloudFormation's pre-signed S3 URL would receive: the answer is read from there.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from retrieval_core.db.migrations.runner import MIGRATION_LOCK_KEY, run_migrations
from retrieval_core.db.migrations.steps import MIGRATIONS, SCHEMA_VERSION
from retrieval_core.db.schema import schema_version
from tests.conftest import EVENTS_DIR, REPO_ROOT
from tests.fakes.http import FakeHTTPServer, Reply
from tests.functional.test_handlers import FakeLambdaContext
from tests.servers import free_port

ALL_VERSIONS = ",".join(str(version) for version, _, _ in MIGRATIONS)
PASSWORD = "pw-7d1e0c9a-not-for-logs"

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def migrate_context(remaining_ms: int = 900_000) -> FakeLambdaContext:
    """The context Lambda gives the migrate function (900 s timeout) with `remaining_ms` left."""
    return FakeLambdaContext(
        function_name="retrieval-MigrateFunction-Q3b7XkP2LmN8",
        function_version="$LATEST",
        memory_limit_in_mb=512,
        aws_request_id="4b1f7e2c-9a3d-4c5e-8f6a-0b1c2d3e4f5a",
        log_group_name="/aws/lambda/retrieval-MigrateFunction-Q3b7XkP2LmN8",
        log_stream_name="2026/11/23/[$LATEST]9f8e7d6c5b4a39281706f5e4d3c2b1a0",
        remaining_ms=remaining_ms,
    )


@pytest.fixture()
def s3() -> Iterator[FakeHTTPServer]:
    """Stands in for the pre-signed S3 URL: accepts any PUT with 200 and an empty body, as S3 does."""
    with FakeHTTPServer() as server:
        server.add_route("PUT", r"/.*", lambda request, match: Reply(200, b""))
        yield server


@pytest.fixture()
def event(s3: FakeHTTPServer) -> Callable[[str], dict[str, Any]]:
    """events/cfn-migrate-<kind>.json with its ResponseURL on the local server (path and query kept)."""

    def load(kind: str) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((EVENTS_DIR / f"cfn-migrate-{kind}.json").read_text())
        url = loaded["ResponseURL"]
        assert url.startswith("http://127.0.0.1:1/")
        loaded["ResponseURL"] = s3.url + url.removeprefix("http://127.0.0.1:1")
        return loaded

    return load


@pytest.fixture()
def use_database(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Point the function's settings at a DATABASE_URL."""
    from retrieval_core.settings import get_settings

    def use(url: str) -> None:
        monkeypatch.setenv("DATABASE_URL", url)
        get_settings.cache_clear()

    yield use
    monkeypatch.undo()
    get_settings.cache_clear()


@pytest.fixture()
def dsn(private_postgres: Any, use_database: Callable[[str], None]) -> str:
    """A PostgreSQL of this test's own, empty, which the function is configured with."""
    url = str(private_postgres.get_uri())
    use_database(url)
    return url


@pytest.fixture()
def handler(use_database: Callable[[str], None]) -> Handler:
    """functions/migrate/app.py's handler, imported as Lambda imports it."""
    path = REPO_ROOT / "functions" / "migrate" / "app.py"
    spec = importlib.util.spec_from_file_location("lambda_function_migrate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    migrate: Handler = module.handler
    return migrate


def the_answer(s3: FakeHTTPServer, sent: dict[str, Any]) -> dict[str, Any]:
    """The one PUT CloudFormation would read, checked as its pre-signed URL requires; its JSON body."""
    (put,) = s3.requests
    assert put.method == "PUT"
    assert put.headers["content-type"] == ""  # signed without a content type
    assert put.raw_path == sent["ResponseURL"].removeprefix(s3.url)
    assert int(put.headers["content-length"]) == len(put.body) <= 4096
    body: dict[str, Any] = put.json()
    for echoed in ("StackId", "RequestId", "LogicalResourceId"):
        assert body[echoed] == sent[echoed]
    assert body["PhysicalResourceId"] == "retrieval-schema"
    return body


def fingerprint(dsn: str) -> dict[str, Any]:
    """Everything a migration could touch: the migrations table, the columns, constraints and indexes,
    the extension, and the rows of every table."""
    with psycopg.connect(dsn) as conn:
        state: dict[str, Any] = {
            "migrations": conn.execute("SELECT * FROM schema_migrations ORDER BY version").fetchall(),
            "columns": conn.execute(
                "SELECT table_name, column_name, data_type, is_nullable, column_default "
                "FROM information_schema.columns WHERE table_schema = 'public' ORDER BY 1, 2"
            ).fetchall(),
            "constraints": conn.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE connamespace = 'public'::regnamespace ORDER BY 1"
            ).fetchall(),
            "indexes": conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
            ).fetchall(),
            "extension": conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchall(),
        }
        for table in ("stores", "documents", "chunks"):
            every_row = f"SELECT string_agg(t::text, '|' ORDER BY t::text), count(*) FROM {table} t"
            state[table] = conn.execute(every_row).fetchone()
    return state


def add_a_document(dsn: str) -> None:
    """A store with one document of one chunk, as the service writes them at the schema's version."""
    # Since migration 4 a document has a source.
    column, value = (", source", ", 'policies/travel.md'") if (version_of(dsn) or 0) >= 4 else ("", "")
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO stores (name, display_name, embedding_model, dimension) "
            "VALUES ('handbook', 'Handbook', 'm', 3)"
        )
        conn.execute(
            f"INSERT INTO documents (store_id, id, title, content_sha256, chunk_count{column}) "
            f"SELECT id, 'policies/travel.md', 'Travel', 'c0ffee', 1{value} "
            "FROM stores WHERE name = 'handbook'"
        )
        conn.execute(
            "INSERT INTO chunks (store_id, document_id, chunk_index, content, embedding) "
            "SELECT id, 'policies/travel.md', 0, 'Expense reports are due within 30 days.', '[1,2,3]' "
            "FROM stores WHERE name = 'handbook'"
        )


def version_of(dsn: str) -> int | None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return schema_version(conn)


def test_create_on_an_empty_database_migrates_it_whole(
    handler: Handler, event: Callable[[str], dict[str, Any]], s3: FakeHTTPServer, dsn: str
) -> None:
    sent = event("create")
    summary = handler(sent, migrate_context())

    body = the_answer(s3, sent)
    assert body["Status"] == "SUCCESS" and "Reason" not in body and body["NoEcho"] is False
    assert body["Data"]["SchemaVersion"] == str(SCHEMA_VERSION) == "19"
    assert body["Data"]["Applied"] == ALL_VERSIONS == "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19"
    assert body["Data"]["PgvectorVersion"].startswith("0.8.")
    assert summary == {
        "Status": "SUCCESS",
        "PhysicalResourceId": "retrieval-schema",
        "Data": body["Data"],
        "Delivered": True,
    }
    assert version_of(dsn) == SCHEMA_VERSION


def test_an_update_on_a_current_schema_changes_nothing(
    handler: Handler, event: Callable[[str], dict[str, Any]], s3: FakeHTTPServer, dsn: str
) -> None:
    run_migrations(dsn)
    add_a_document(dsn)
    before = fingerprint(dsn)

    sent = event("update")
    handler(sent, migrate_context())

    body = the_answer(s3, sent)
    assert body["Status"] == "SUCCESS"
    assert body["Data"]["SchemaVersion"] == "19" and body["Data"]["Applied"] == ""
    assert fingerprint(dsn) == before
    assert before["chunks"][1] == 1  # the fingerprint saw the data


def test_an_update_on_an_older_schema_applies_what_is_missing_and_keeps_the_data(
    handler: Handler, event: Callable[[str], dict[str, Any]], s3: FakeHTTPServer, dsn: str
) -> None:
    run_migrations(dsn, migrations=MIGRATIONS[:3])
    add_a_document(dsn)

    sent = event("update")
    handler(sent, migrate_context())

    body = the_answer(s3, sent)
    assert body["Status"] == "SUCCESS"
    assert body["Data"]["Applied"] == "4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19"
    assert body["Data"]["SchemaVersion"] == "19"
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT d.id, d.source, c.content FROM documents d JOIN chunks c ON c.document_id = d.id"
        ).fetchone()
        counted = conn.execute("SELECT chunk_count FROM stores").fetchone()
        keywords = conn.execute(
            "SELECT s.keyword_ready, s.keyword_chunk_count, k.tsv::text FROM stores s JOIN keyword_chunks k"
            " ON k.store_id = s.id"
        ).fetchall()
    # Migration 4 gave the existing document its source; migration 6 counted the store's chunk; the
    # keyword backfill after migration 7 indexed it, in the same run, with its title (migration 8).
    assert row == ("policies/travel.md", "policies/travel.md", "Expense reports are due within 30 days.")
    assert counted == (1,)
    assert keywords == [(True, 1, "'30':7 'day':8 'due':5 'expens':2 'report':3 'travel':1 'within':6")]


class CountingListener:
    """A TCP port on 127.0.0.1 that accepts connections and counts them (and says nothing)."""

    def __init__(self) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self._socket.settimeout(0.05)
        self.port = self._socket.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._socket.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close()


def test_delete_answers_at_once_without_connecting_and_the_data_stays(
    handler: Handler,
    event: Callable[[str], dict[str, Any]],
    s3: FakeHTTPServer,
    dsn: str,
    use_database: Callable[[str], None],
) -> None:
    run_migrations(dsn)
    add_a_document(dsn)
    before = fingerprint(dsn)
    listener = CountingListener()
    use_database(f"postgresql://retrieval:{PASSWORD}@127.0.0.1:{listener.port}/postgres")
    try:
        sent = event("delete")
        started = time.monotonic()
        # A short budget: were Delete to connect, it would give up (and fail here) within seconds.
        handler(sent, migrate_context(remaining_ms=13_000))
        took = time.monotonic() - started
    finally:
        listener.close()

    body = the_answer(s3, sent)
    assert body["Status"] == "SUCCESS" and body["Data"] == {}
    assert listener.accepted == 0 and took < 2.0
    assert fingerprint(dsn) == before


def test_an_update_lowering_the_schema_version_like_a_rollback_does_nothing(
    handler: Handler,
    event: Callable[[str], dict[str, Any]],
    s3: FakeHTTPServer,
    use_database: Callable[[str], None],
) -> None:
    # A failed Update from 8 to 9 is rolled back with the old properties: 9 to 8, sent to the new code.
    sent = event("update")
    sent["ResourceProperties"]["SchemaVersion"], sent["OldResourceProperties"]["SchemaVersion"] = "8", "9"
    listener = CountingListener()
    use_database(f"postgresql://retrieval:{PASSWORD}@127.0.0.1:{listener.port}/postgres")
    try:
        handler(sent, migrate_context(remaining_ms=13_000))
    finally:
        listener.close()

    body = the_answer(s3, sent)
    assert body["Status"] == "SUCCESS"
    assert body["Data"] == {"SchemaVersion": "", "Applied": "", "PgvectorVersion": ""}
    assert listener.accepted == 0


def test_an_unreachable_database_is_answered_failed_in_time_with_no_secret(
    handler: Handler,
    event: Callable[[str], dict[str, Any]],
    s3: FakeHTTPServer,
    use_database: Callable[[str], None],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    use_database(f"postgresql://retrieval:{PASSWORD}@127.0.0.1:{free_port()}/postgres")
    sent = event("create")
    started = time.monotonic()
    # 13 s left, 10 of them kept for answering: 3 s to connect.
    summary = handler(sent, migrate_context(remaining_ms=13_000))
    took = time.monotonic() - started

    body = the_answer(s3, sent)
    assert body["Status"] == summary["Status"] == "FAILED"
    assert body["Reason"].startswith("DatabaseUnavailableError: could not connect to PostgreSQL: ")
    assert (
        "deploy again; otherwise check DATABASE_HOST, the security groups and the database credentials"
        in body["Reason"]
    )
    assert body["Reason"].endswith(
        "(details: log stream 2026/11/23/[$LATEST]9f8e7d6c5b4a39281706f5e4d3c2b1a0)"
    )
    assert 1.5 < took < 5.0
    logs = caplog.text + "".join(capfd.readouterr())
    assert "Traceback" in logs and "Connection refused" in logs  # the driver's message, for the operator
    assert PASSWORD not in json.dumps(body) + json.dumps(summary) + logs


def test_a_malformed_database_url_is_answered_failed_without_quoting_it(
    handler: Handler,
    event: Callable[[str], dict[str, Any]],
    s3: FakeHTTPServer,
    use_database: Callable[[str], None],
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    use_database("postgresql://retrieval:correct horse battery@127.0.0.1:5432/postgres")
    sent = event("update")
    handler(sent, migrate_context())

    body = the_answer(s3, sent)
    assert body["Status"] == "FAILED"
    assert body["Reason"].startswith(
        "ConfigurationError: the database connection string (DATABASE_URL) is malformed"
    )
    logs = caplog.text + "".join(capfd.readouterr())
    assert "ConfigurationError" in logs
    assert "horse" not in json.dumps(body) + logs


def test_a_migration_that_would_outlast_the_function_is_answered_failed_and_rolled_back(
    handler: Handler, event: Callable[[str], dict[str, Any]], s3: FakeHTTPServer, dsn: str
) -> None:
    run_migrations(dsn, migrations=MIGRATIONS[:3])
    before = fingerprint(dsn)
    sent = event("update")
    # Another migrator (a second stack's, a person's `retrieval migrate`) holds the lock past the time left.
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
        started = time.monotonic()
        handler(sent, migrate_context(remaining_ms=13_000))
        took = time.monotonic() - started

    body = the_answer(s3, sent)
    assert body["Status"] == "FAILED"
    assert body["Reason"].startswith(
        "MigrationTimeoutError: the schema migration ran out of its 3 s while waiting for the migration lock"
    )
    assert (
        "run `retrieval migrate` with DATABASE_URL set, from a host that reaches the database"
        in body["Reason"]
    )
    assert 2.5 < took < 5.0  # the answer came well before the invocation's end (13 s)
    assert fingerprint(dsn) == before and version_of(dsn) == 3

    # Once the other migrator is done, the same request succeeds.
    s3.reset()
    handler(sent, migrate_context())
    assert the_answer(s3, sent)["Data"]["Applied"] == "4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19"


def test_an_applied_migration_edited_since_is_answered_failed_and_nothing_is_applied(
    handler: Handler, event: Callable[[str], dict[str, Any]], s3: FakeHTTPServer, dsn: str
) -> None:
    run_migrations(dsn, migrations=MIGRATIONS[:3])
    # What a file edited after the database applied it looks like to the runner: another checksum.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE schema_migrations SET checksum = repeat('0', 64) WHERE version = 2")
    before = fingerprint(dsn)
    sent = event("update")
    handler(sent, migrate_context())

    body = the_answer(s3, sent)
    assert body["Status"] == "FAILED"
    assert body["Reason"].startswith(
        f"MigrationChecksumError: migration 2 ({MIGRATIONS[1].description}) was edited after this database "
        "applied it"
    )
    assert fingerprint(dsn) == before and version_of(dsn) == 3


def test_the_schedule_builds_the_largest_stores_index_within_the_functions_time(
    handler: Handler, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.db.connection import SingleConnection
    from retrieval_core.settings import get_settings
    from tests.writing import GivenVectors, TextDocument, ensure_store, write_documents

    monkeypatch.setenv("STORE_INDEX_MIN_CHUNKS", "20")
    get_settings.cache_clear()
    run_migrations(dsn)
    texts = {f"chunk {i}": [1.0, float(i), 0.5, -0.5] for i in range(30)}
    embedder = GivenVectors("given", 4, texts)
    database = SingleConnection(dsn, 5, 15_000)
    try:
        service = RetrievalService(database, embedder, "large", 40)
        for name, count in (("large", 30), ("small", 5)):
            ensure_store(service, name, embedder)
            documents = [TextDocument(id=f"d{i}", text=t) for i, t in enumerate(list(texts)[:count])]
            write_documents(service, name, documents, 200, 0, embedder)
        large = service.get_store("large")
    finally:
        database.close()

    task = json.loads((EVENTS_DIR / "schedule-index-stores.json").read_text())
    outcome = handler(task, migrate_context(remaining_ms=120_000))
    assert outcome == {
        "busy": False,
        "done": ["build HNSW index of store large (30 chunks)"],
        "failed": [],
        "left": [],
        "auditRowsDeleted": 0,
    }
    with psycopg.connect(dsn) as conn:
        names = [r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%hnsw%'")]
    assert names == [f"chunks_embedding_hnsw_store_{large.id}"]
    # Too little time left to start a build: nothing is started, and what is left is said.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP INDEX chunks_embedding_hnsw_store_{large.id}")
    outcome = handler(task, migrate_context(remaining_ms=5_500))
    assert outcome["done"] == [] and outcome["left"] == ["build HNSW index of store large (30 chunks)"]


def test_the_schedule_deletes_audit_rows_older_than_the_retention(
    handler: Handler, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.db.connection import SingleConnection
    from retrieval_core.settings import get_settings
    from tests.writing import GivenVectors, TextDocument, ensure_store, write_documents

    run_migrations(dsn)
    texts = {f"page {i}": [1.0, float(i), 0.5, -0.5] for i in range(3)}
    embedder = GivenVectors("given", 4, texts)
    database = SingleConnection(dsn, 5, 15_000)
    try:
        service = RetrievalService(database, embedder, "kept", 40)
        ensure_store(service, "kept", embedder)
        documents = [TextDocument(id=f"d{i}", text=t) for i, t in enumerate(texts)]
        write_documents(service, "kept", documents, 200, 0, embedder)
    finally:
        database.close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        written = conn.execute("SELECT count(*) FROM audit_log WHERE store = 'kept'").fetchone()
        conn.execute("UPDATE audit_log SET at = now() - interval '8 days'")
    assert written is not None and written[0] == 4  # the store, then its three documents

    task = json.loads((EVENTS_DIR / "schedule-index-stores.json").read_text())
    monkeypatch.setenv("AUDIT_RETENTION_DAYS", "10")
    get_settings.cache_clear()
    assert handler(task, migrate_context())["auditRowsDeleted"] == 0
    monkeypatch.setenv("AUDIT_RETENTION_DAYS", "7")
    get_settings.cache_clear()
    assert handler(task, migrate_context())["auditRowsDeleted"] == 4
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (0,)
