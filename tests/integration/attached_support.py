"""Shared by the attached-store tests: a similarity search held to the HNSW index's answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from retrieval_core.grants import OPEN_GRANT
from retrieval_core.models import SearchKnobs, SimilaritySearchRequest
from retrieval_core.service import RetrievalService


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
