"""Fixtures of the integration tier."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from tests.doc_examples import ServedApp
from tests.fakes.gemini import FakeGemini
from tests.integration.knowledge_support import GEMINI_KEY, knowledge_client, stock_fake
from tests.writing import STORES


@pytest.fixture()
def own_runtime(service_env: dict[str, str]) -> Iterator[Any]:
    """Rebuild the process-wide service under extra environment variables; restore the shared one after."""
    from retrieval_core import container
    from retrieval_core.settings import get_settings

    monkeypatch = pytest.MonkeyPatch()
    shared = container.replace_service(None)  # set aside, not closed: other tests keep using it

    def apply(**env: str) -> None:
        container.reset_service()
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()

    yield apply
    monkeypatch.undo()
    container.reset_service()
    get_settings.cache_clear()
    container.replace_service(shared)


@pytest.fixture()
def gemini() -> Iterator[FakeGemini]:
    """A fake Gemini API holding the stock stores (tests.integration.knowledge_support)."""
    with FakeGemini(api_key=GEMINI_KEY) as fake:
        stock_fake(fake)
        yield fake


@pytest.fixture()
def gemini_client(gemini: FakeGemini, sample_store: Any) -> Iterator[TestClient]:
    """A TestClient over the full app, its knowledge service talking to `gemini`."""
    with knowledge_client(gemini) as test_client:
        yield test_client


@pytest.fixture()
def configure(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Set environment variables for one test: `configure(NAME="value", ...)` returns the settings rebuilt
    from them. Undone after: settings, cached secrets and the rate limiter follow the environment again."""
    from retrieval_core.clients.secret_store import forget_cached_secrets
    from retrieval_core.ratelimit.limiter import replace_rate_limiter
    from retrieval_core.settings import get_settings

    def apply(**env: str) -> Any:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        forget_cached_secrets()
        return get_settings()

    yield apply
    monkeypatch.undo()
    get_settings.cache_clear()
    forget_cached_secrets()
    replace_rate_limiter(None)


@pytest.fixture()
def table(moto: Any) -> str:
    """A fresh cache table (the stack's shape) on the test's moto_server; its name."""
    from tests.servers import create_cache_table

    name = f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), name)
    return name


@pytest.fixture(scope="session")
def served_app() -> Iterator[ServedApp]:
    """One `retrieval serve` on a fresh database, for the README's and the docs' examples."""
    from tests.doc_examples import served_app

    with served_app() as app:
        yield app


@pytest.fixture()
def poison_trigger(postgres_dsn: str, service: Any) -> Iterator[None]:
    """A trigger that makes PostgreSQL reject any chunk containing 'poison-pill', mid-COPY (created by the
    owner of `chunks`: the service's role may not)."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            """CREATE OR REPLACE FUNCTION test_reject_poison() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                 IF NEW.content LIKE '%poison-pill%' THEN RAISE EXCEPTION 'poisoned chunk'; END IF;
                 RETURN NEW;
               END $$"""
        )
        conn.execute(
            "CREATE TRIGGER test_reject_poison BEFORE INSERT ON chunks"
            " FOR EACH ROW EXECUTE FUNCTION test_reject_poison()"
        )
    yield
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TRIGGER test_reject_poison ON chunks")
        conn.execute("DROP FUNCTION test_reject_poison()")


@pytest.fixture()
def store(client: TestClient) -> Iterator[str]:
    """A new empty store of its own, created and deleted over HTTP."""
    name = f"test-{uuid.uuid4().hex[:8]}"
    assert client.put(f"{STORES}/{name}", json={}).status_code == 201
    yield name
    client.delete(f"{STORES}/{name}")
