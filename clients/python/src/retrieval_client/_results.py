"""What the LangChain and LlamaIndex retrievers make of a retrieve answer's results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_client.models import ChunkResult

SCORE_KEYS = ("score", "keywordScore", "fusedScore", "rerankScore")


def ranking_score(result: ChunkResult) -> float | None:
    """The score the results are ordered by: the rerank score, else the fused one, else the similarity."""
    for key in ("rerankScore", "fusedScore", "score"):
        value = result.get(key)
        if isinstance(value, int | float):
            return float(value)
    return None


def result_metadata(result: ChunkResult) -> dict[str, Any]:
    """The chunk's metadata (documentId, chunkIndex, the document's own keys) with its id and scores."""
    metadata: dict[str, Any] = dict(result["metadata"])
    metadata["chunkId"] = result["id"]
    for key in SCORE_KEYS:
        if result.get(key) is not None:
            metadata[key] = result.get(key)
    return metadata


def retrieve_body(
    query: str, grade: float, top_k: int, store: str | None, options: Mapping[str, Any]
) -> dict[str, Any]:
    """The retrieve request of a retriever: its options (filters, hybrid, rerank, ...) as given."""
    body: dict[str, Any] = {"similarityTopK": top_k, **options, "query": query, "grade": grade}
    if store is not None:
        body["store"] = store
    return body
