"""The rerank step of a retrieve: which strategy a request reranks with, and the reranking itself."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.exceptions import RerankerUnavailableError
from retrieval_core.observability import metrics

if TYPE_CHECKING:
    from retrieval_core.rerank.base import Reranker
    from retrieval_core.schemas.retrieve import Pipeline, RetrieveRequest

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rerankers:
    """The rerankers a service may call: `get(strategy)` gives one, or None when it is not configured."""

    get: Callable[[str], Reranker | None]
    default_strategy: str | None
    # Which models answer; part of cache keys, so changing a reranker never serves old rankings.
    identity: str


def rerank_strategy(request: RetrieveRequest, rerankers: Rerankers | None) -> str | None:
    """The strategy this request reranks with: asked for, else the configured default, else none."""
    if request.engine_name == "naive":
        return None
    if request.rerank is not None:
        return request.rerank.strategy if request.rerank.enabled else None
    return rerankers.default_strategy if rerankers is not None else None


def reranked(
    request: RetrieveRequest,
    strategy: str,
    query_vector: Sequence[float] | None,
    chunks: list[ScoredChunk],
    pipeline: Pipeline,
    scores: dict[tuple[str, int], float],
    rerankers: Rerankers | None,
    depth: int | None = None,
) -> list[ScoredChunk]:
    """`chunks` in reranked order, recording scores and what happened in `pipeline`.

    A model reranker that is not configured or fails leaves the order as it was, with a warning:
    reranking improves an answer, it is never the reason there is none.
    """
    if strategy == "mmr":
        from retrieval_core.rerank.mmr import maximal_marginal_relevance

        vectors = [c.embedding for c in chunks if c.embedding is not None]
        assert len(vectors) == len(chunks), "mmr needs the stored embeddings"
        assert query_vector is not None, "mmr needs the query's embedding (refused in keyword mode)"
        order = maximal_marginal_relevance(
            query_vector, vectors, depth or request.result_count, request.mmr_lambda
        )
        pipeline.reranked, pipeline.rerank_strategy = True, "mmr"
        return [chunks[i] for i in order]
    reranker = rerankers.get(strategy) if rerankers is not None else None
    if reranker is None:
        pipeline.warnings.append(f"reranker '{strategy}' is not configured; results keep search order")
        return chunks
    try:
        ranked = reranker.rerank(request.query, [c.content for c in chunks])
    except RerankerUnavailableError as exc:
        logger.warning("reranker %s failed, keeping search order: %s", strategy, exc.message)
        metrics.count("RerankFallback")
        pipeline.warnings.append(f"reranker '{strategy}' failed ({exc.message}); results keep search order")
        return chunks
    pipeline.reranked, pipeline.rerank_strategy = True, strategy
    minimum = request.rerank.score if request.rerank is not None else None
    reordered = []
    for item in ranked:
        if minimum is None or item.score >= minimum:
            chunk = chunks[item.index]
            scores[chunk.key] = item.score
            reordered.append(chunk)
    return reordered
