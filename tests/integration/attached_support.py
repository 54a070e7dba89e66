"""Shared by the attached-store tests: a similarity search held to the HNSW index's answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db.connection import SingleConnection
from retrieval_core.grants import OPEN_GRANT
from retrieval_core.schemas.search_options import SearchKnobs
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest


def similar_ids(
    service: RetrievalService, store: str, query: np.ndarray, where: dict[str, Any] | None, k: int
) -> list[str]:
    """The ids of the top `k` rows of `store` for `query` under `where`, uncached, at ef_search 100."""
    request = SimilaritySearchRequest(
        query_embedding=query.tolist(),
        top_k=k,
        store=store,
        metadata_filter=where,
        search=SearchKnobs(ef_search=100),
        cache_ttl_ms=0,
    )
    response, _ = service.similarity_search(request, grant=OPEN_GRANT)
    return [r.id for r in response.results]


def index_recalls(
    service: RetrievalService,
    store: str,
    queries: Any,
    exact: Callable[[np.ndarray, np.ndarray | None], list[str]],
    one: np.ndarray,
    k: int,
) -> tuple[list[float], list[float], list[list[str]]]:
    """Recall@k of `store` through its index alone, unfiltered and under `{"tenant": "one"}` (whose rows
    `one` masks), against `exact`; every filtered answer must hold the full k. Also the filtered answers."""
    recall_all, recall_one, answers = [], [], []
    for query in queries:
        found = similar_ids(service, store, query, None, k)
        recall_all.append(len(set(found) & set(exact(query, None))) / k)
        filtered = similar_ids(service, store, query, {"tenant": "one"}, k)
        assert len(filtered) == k
        recall_one.append(len(set(filtered) & set(exact(query, one))) / k)
        answers.append(filtered)
    return recall_all, recall_one, answers


def assert_index_recall(
    dsn: str,
    embedder: Any,
    store: str,
    queries: Any,
    exact: Callable[[np.ndarray, np.ndarray | None], list[str]],
    one: np.ndarray,
    k: int,
) -> None:
    """Recall@k through the index alone (exact path off) is at least 0.95, unfiltered and at the 1% filter."""
    database = SingleConnection(dsn, 5, 15_000)
    index_only = RetrievalService(database, embedder, "sample", 100, exact_search_max_rows=0)
    try:
        recall_all, recall_one, _ = index_recalls(index_only, store, queries, exact, one, k)
    finally:
        database.close()
    assert np.mean(recall_all) >= 0.95 and np.mean(recall_one) >= 0.95, (recall_all, recall_one)
