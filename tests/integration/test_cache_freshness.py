"""No stale answer after a write, on any instance, whatever DynamoDB does at the moment of the write.

Two service instances, each with its own boto3 client and its own process memory, share one cache table
on moto_server behind a proxy that throttles, answers too slowly, or resets connections on demand.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.api.app import create_app
from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.cache.backends import PAUSE_AFTER_FAILURE_S, DynamoDBBackend
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.cache.search_cache import SearchCache
from retrieval_core.clients.aws import fail_open_options, lazy_aws_client
from retrieval_core.container import get_document_service, get_service
from retrieval_core.documents.service import DocumentService
from retrieval_core.observability import metrics
from tests.fakes.clock import ManualClock
from tests.fakes.fault_proxy import FaultProxy, Mode
from tests.servers import MotoServer, create_cache_table

OLD = "Visitor badges are renewed every year at the front desk."
NEW = "Visitor badges are renewed every two years by the security team."


@dataclass
class Instance:
    """One Lambda instance's worth of state: its service, its cache client, its HTTP app."""

    client: TestClient

    def write(self, store: str, text: str) -> None:
        response = self.client.put(f"/api/v1/stores/{store}/documents/badges", json={"text": text})
        assert response.status_code in (200, 201), response.text

    def ask(self, store: str) -> tuple[str, str]:
        body = {"query": "How often are visitor badges renewed?", "grade": 0.0, "similarityTopK": 1}
        response = self.client.post("/api/v1/rag/retrieve", json={**body, "store": store})
        assert response.status_code == 200, response.text
        return response.headers["X-Cache"], response.json()["results"][0]["content"]


def instance(shared: RetrievalService, table: str, endpoint_url: str, clock: ManualClock) -> Instance:
    # The production client options: 1 s timeouts, one retry.
    backend = DynamoDBBackend(
        table, lazy_aws_client("dynamodb", fail_open_options(endpoint_url)), clock=clock
    )
    cache = SearchCache(
        JsonCache(backend, "search"), JsonCache(backend, "store"), shared=True, default_ttl_s=300
    )
    service = RetrievalService(shared.database, shared.embedder, "sample", shared.ef_search, cache=cache)
    app = create_app()
    app.dependency_overrides[get_service] = lambda: service
    app.dependency_overrides[get_document_service] = lambda: DocumentService(service, 500, 50)
    return Instance(TestClient(app))


@pytest.fixture()
def proxy(moto: MotoServer) -> Any:
    with FaultProxy(moto.endpoint_url) as running:
        yield running


@pytest.mark.parametrize("fault", ["throttle", "slow", "reset"])
def test_a_write_while_the_cache_fails_is_seen_by_every_instance_then_and_after_it_recovers(
    fault: Mode, moto: MotoServer, proxy: FaultProxy, service: RetrievalService, aws_env: None
) -> None:
    table = f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    clock = ManualClock()
    writer, reader = (instance(service, table, proxy.endpoint_url, clock) for _ in range(2))
    store = f"fresh-{fault}"
    assert writer.client.put(f"/api/v1/stores/{store}", json={}).status_code in (200, 201)
    writer.write(store, OLD)
    assert reader.ask(store) == ("miss", OLD)
    assert reader.ask(store) == ("hit", OLD)
    assert writer.ask(store) == ("hit", OLD)  # one table: the writer's instance sees the reader's answer
    answers_cached = moto.client("dynamodb").scan(TableName=table)["Count"]

    proxy.mode = fault
    requests_before = proxy.requests
    errors_before = metrics.counters["CacheError"]
    writer.write(store, NEW)
    assert proxy.requests == requests_before  # the write asks nothing of the cache, so cannot fail on it
    assert reader.ask(store) == ("miss", NEW)
    assert writer.ask(store) == ("miss", NEW)
    assert metrics.counters["CacheError"] > errors_before  # served uncached, counted (CacheErrorAlarm)

    # A read of the answer under the version seen before the write runs beside the store's lookup, and
    # nobody waits for it once the versions differ: let it fail now, not after the recovery.
    proxy.wait_until_quiet()
    proxy.mode = "pass"
    clock.now += PAUSE_AFTER_FAILURE_S  # both instances ask the table again
    # The answer cached before the write is still in the table, and is never served again.
    assert moto.client("dynamodb").scan(TableName=table)["Count"] == answers_cached
    assert reader.ask(store) == ("miss", NEW)
    assert reader.ask(store) == ("hit", NEW)
    assert writer.ask(store) == ("hit", NEW)
