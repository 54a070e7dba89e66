"""The serving and write roles the migration sets up (db/migrations/roles.py, docs/security.md "Database
roles"), on the embedded PostgreSQL: what each may do, the read path as the serving role, and a migrating
user who may not create roles."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from retrieval_core.db.migrations.roles import RoleSetup, ServiceRoles, as_role, service_names
from retrieval_core.db.migrations.runner import run_migrations
from retrieval_core.db.migrations.steps import MIGRATIONS
from retrieval_core.exceptions import MigrationError
from tests.files import corrupt_pdf_bytes

DDL = (
    "DROP TABLE chunks",
    "CREATE TABLE intruder (id int)",
    "ALTER TABLE stores ADD COLUMN intruder int",
    "TRUNCATE chunks",
    "DROP SCHEMA public CASCADE",
    "CREATE INDEX intruder ON chunks (store_id)",
)


def refused(dsn: str, statement: str) -> bool:
    """True when PostgreSQL refuses `statement` for lack of privilege (rolled back either way)."""
    with psycopg.connect(dsn) as conn:
        try:
            conn.execute(statement.encode())
        except psycopg.errors.InsufficientPrivilege:
            return True
        finally:
            conn.rollback()
    return False


def test_the_migrations_tables_and_functions_are_the_service_objects() -> None:
    tables, sequences, functions = service_names(MIGRATIONS)
    assert {"schema_migrations", "stores", "documents", "chunks", "keyword_terms", "keyword_chunks"} <= set(
        tables
    )
    assert sequences == ["store_versions"]
    assert {"keyword_hits", "keyword_index", "shared_indexes_ready"} <= set(functions)


@pytest.mark.parametrize("role", ["serve", "write"])
@pytest.mark.parametrize("statement", DDL)
def test_neither_role_may_change_the_schema(
    role: str, statement: str, serve_dsn: str, write_dsn: str
) -> None:
    assert refused(serve_dsn if role == "serve" else write_dsn, statement)


def test_the_serving_role_reads_and_never_writes(serve_dsn: str, sample_store: Any) -> None:
    with psycopg.connect(serve_dsn) as conn:
        counted = conn.execute("SELECT count(*) FROM chunks WHERE store_id = %s", (sample_store.id,))
        assert counted.fetchone() == (sample_store.chunk_count,)
        conn.execute("SELECT count(*) FROM document_status").fetchone()
        conn.execute("SELECT count(*) FROM ingestion_counts").fetchone()
    for statement in (
        "UPDATE stores SET display_name = 'x'",
        "DELETE FROM chunks",
        "DELETE FROM document_status",
        "UPDATE ingestion_counts SET failed = 0",
        "INSERT INTO schema_migrations (version, name) VALUES (999, 'x')",
        "SELECT nextval('store_versions')",
    ):
        assert refused(serve_dsn, statement), statement


def test_the_write_role_writes_rows_but_not_the_migrations_record(write_dsn: str) -> None:
    with psycopg.connect(write_dsn) as conn:
        conn.execute("SELECT nextval('store_versions')")
        conn.execute("UPDATE stores SET updated_at = updated_at")
        conn.rollback()
    assert refused(write_dsn, "DELETE FROM schema_migrations")
    # The audit log is append-only for the service: only the owner's pruning deletes from it.
    assert refused(write_dsn, "DELETE FROM audit_log")
    assert refused(write_dsn, "UPDATE audit_log SET outcome = outcome")


def test_neither_role_reaches_another_schema(
    postgres_dsn: str, serve_dsn: str, write_dsn: str, service: Any
) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS elsewhere")
        conn.execute("CREATE TABLE IF NOT EXISTS elsewhere.secrets (v text)")
    for dsn in (serve_dsn, write_dsn):
        assert refused(dsn, "SELECT * FROM elsewhere.secrets")
        assert refused(dsn, "CREATE TABLE elsewhere.intruder (id int)")


def app_signed_in_as(own_runtime: Any, dsn: str) -> Iterator[TestClient]:
    """The app on a runtime of its own that signs in with `dsn` (the schema is already migrated)."""
    from retrieval_core.api.app import create_app

    own_runtime(DATABASE_URL=dsn, AUTO_MIGRATE="false")
    with TestClient(create_app()) as client:
        yield client


@pytest.fixture()
def serving_client(own_runtime: Any, serve_dsn: str, sample_store: Any) -> Iterator[TestClient]:
    """The app on the serving role, as the deployed read functions run."""
    yield from app_signed_in_as(own_runtime, serve_dsn)


def test_retrieve_works_as_the_serving_role_and_a_write_needs_the_write_role(
    serving_client: TestClient,
) -> None:
    answer = serving_client.post(
        "/api/v1/rag/retrieve", json={"query": "espresso machine", "store": "sample", "grade": 0.0}
    )
    assert answer.status_code == 200 and answer.json()["results"]
    write = serving_client.put("/api/v1/stores/sample/documents/roles-probe", json={"text": "a probe"})
    assert write.status_code == 500
    assert write.json()["error"]["code"] == "database_misconfigured"


def test_later_migrations_tables_are_granted_on_the_next_run(
    postgres_dsn: str, service_roles: ServiceRoles
) -> None:
    # A new database, so that its extra migration stays out of the shared one.
    admin = psycopg.connect(postgres_dsn, autocommit=True)
    admin.execute("DROP DATABASE IF EXISTS roles_later")
    admin.execute("CREATE DATABASE roles_later")
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, dbname="roles_later")
    later = (len(MIGRATIONS) + 1, "a later table", "-- a later table\nCREATE TABLE later_table (id bigint)")
    try:
        run_migrations(dsn, migrations=[*MIGRATIONS, later], roles=RoleSetup(prefix="roles_later"))
        serve = as_role(dsn, "roles_later_serve")
        with psycopg.connect(serve) as conn:
            conn.execute("SELECT * FROM later_table")
        assert refused(serve, "INSERT INTO later_table VALUES (1)")
        with psycopg.connect(as_role(dsn, "roles_later_write")) as conn:
            conn.execute("INSERT INTO later_table VALUES (1)")
    finally:
        admin.execute("DROP DATABASE IF EXISTS roles_later WITH (FORCE)")
        admin.close()


def test_a_migrating_user_who_may_not_create_roles_is_told_what_is_missing(
    postgres_dsn: str, service: Any
) -> None:
    admin = psycopg.connect(postgres_dsn, autocommit=True)
    for statement in (
        "DROP DATABASE IF EXISTS roles_nocreate WITH (FORCE)",
        "DROP ROLE IF EXISTS nocreate_serve",
        "DROP ROLE IF EXISTS nocreate_write",
        "DROP ROLE IF EXISTS nocreate_owner",
        "CREATE ROLE nocreate_owner LOGIN",  # no CREATEROLE
        "CREATE DATABASE roles_nocreate OWNER nocreate_owner",
    ):
        admin.execute(statement)
    dsn = psycopg.conninfo.make_conninfo(postgres_dsn, dbname="roles_nocreate")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")  # a superuser's step, as on many managed servers
    owner = as_role(dsn, "nocreate_owner")
    setup = RoleSetup(prefix="nocreate")
    try:
        with pytest.raises(MigrationError) as raised:
            run_migrations(owner, roles=setup)
        message = str(raised.value)
        assert (
            "role nocreate_serve does not exist" in message
            and "role nocreate_write does not exist" in message
        )
        assert 'docs/security.md, "Database roles"' in message
        assert "nothing of this run was applied" in message
        # The DBA's SQL of docs/security.md; then the owner grants the rest itself.
        for role in ("nocreate_serve", "nocreate_write"):
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        assert run_migrations(owner, roles=setup).schema_version == len(MIGRATIONS)
        with psycopg.connect(as_role(dsn, "nocreate_serve")) as conn:
            conn.execute("SELECT count(*) FROM stores")
    finally:
        admin.execute("DROP DATABASE IF EXISTS roles_nocreate WITH (FORCE)")
        for role in ("nocreate_serve", "nocreate_write", "nocreate_owner"):
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
        admin.close()


def test_rds_iam_is_granted_where_it_exists(postgres_dsn: str, service_roles: ServiceRoles) -> None:
    admin = psycopg.connect(postgres_dsn, autocommit=True)
    admin.execute("CREATE ROLE rds_iam NOLOGIN")  # what RDS and Aurora have
    try:
        run_migrations(postgres_dsn, roles=RoleSetup(iam=True))
        for role in (service_roles.serve, service_roles.write):
            member = admin.execute("SELECT pg_has_role(%s, 'rds_iam', 'MEMBER')", (role,)).fetchone()
            assert member == (True,), role
    finally:
        admin.execute("DROP ROLE rds_iam")
        admin.close()


@pytest.fixture()
def writing_client(own_runtime: Any, write_dsn: str, service: Any) -> Iterator[TestClient]:
    """The app on the write role, as the deployed documents function runs."""
    yield from app_signed_in_as(own_runtime, write_dsn)


def test_every_write_of_the_documents_api_works_as_the_write_role(
    writing_client: TestClient, postgres_dsn: str
) -> None:
    store = "/api/v1/stores/role-writes"
    assert writing_client.put(store, json={"allowedMetadataKeys": ["team"]}).status_code == 201
    doc = f"{store}/documents/runbook"
    body = {"text": "Rotate the on-call pager every Monday.", "metadata": {"team": "ops"}}
    assert writing_client.put(doc, json=body).status_code == 201
    assert writing_client.get(doc).json()["writtenBy"] == "open"
    # A failed write's outcome is kept, in a transaction of its own, by the same role.
    broken = {"content": base64.b64encode(corrupt_pdf_bytes()).decode(), "contentType": "application/pdf"}
    assert writing_client.put(f"{store}/documents/broken.pdf", json=broken).status_code == 422
    failed = writing_client.get(f"{store}/documents", params={"status": "failed"}).json()
    listed = [(d["documentId"], d["code"]) for d in failed["documents"]]
    assert listed == [("broken.pdf", "unreadable_document")]
    assert (failed["statistics"]["added"], failed["statistics"]["failed"]) == (1, 1)
    assert writing_client.delete(f"{store}/documents/broken.pdf").status_code == 404
    assert writing_client.get(f"{store}/documents", params={"status": "failed"}).json()["documents"] == []
    found = writing_client.post(
        "/api/v1/rag/retrieve", json={"query": "pager rotation", "store": "role-writes", "grade": 0.0}
    )
    assert found.status_code == 200 and found.json()["results"][0]["content"] == body["text"]
    assert writing_client.put(store, json={"allowedMetadataKeys": ["team", "tier"]}).status_code == 200
    assert writing_client.delete(doc).status_code == 204
    assert writing_client.delete(store).status_code == 204
    with psycopg.connect(postgres_dsn) as conn:
        actions = conn.execute(
            "SELECT action, outcome FROM audit_log WHERE store = 'role-writes' ORDER BY id"
        ).fetchall()
    assert actions == [
        ("put_store", "created"),
        ("put_document", "created"),
        ("delete_document", "not_found"),
        ("put_store", "updated"),
        ("delete_document", "deleted"),
        ("delete_store", "deleted"),
    ]
