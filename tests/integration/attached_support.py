"""Shared by the attached-store tests: a similarity search held to the HNSW index's answer."""

from __future__ import annotations

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
