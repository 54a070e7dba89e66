"""The parts of a pgvector answer: fused scores, the pipeline record, chunk results, and completeness."""

from __future__ import annotations

from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.db.stores import Store
from retrieval_core.schemas.results import ChunkResult
from retrieval_core.schemas.retrieve import Pipeline, RetrieveRequest, RetrieveResponse, Timings
from retrieval_core.schemas.similarity_search import SimilaritySearchResponse
from retrieval_core.search.fusion import Key, fuse
from retrieval_core.search.keyword_query import is_keyword_note


def fused_scores(request: RetrieveRequest, candidates: list[ScoredChunk]) -> dict[Key, float]:
    """The fused score of each candidate by its key, when the request is hybrid; else none."""
    return (
        fuse(
            candidates,
            request.fusion,
            request.vector_weight,
            request.keyword_weight,
            rrf_k=request.rrf_k,
            normalization=request.normalization,
        )
        if request.use_hybrid
        else {}
    )


def search_pipeline(
    request: RetrieveRequest,
    store: Store,
    candidates: list[ScoredChunk],
    timings: Timings,
    warnings: list[str],
) -> Pipeline:
    """What the search did, before any rerank: candidates, fusion, keyword scorer, timings, warnings."""
    return Pipeline(
        candidates_considered=len(candidates),
        hybrid=request.use_hybrid,
        fusion=request.fusion if request.use_hybrid else None,
        # An attached table's own text column: ts_rank_cd (no IDF statistics of a table we do not write).
        keyword_scorer=(
            ("bm25" if store.keyword_ready and store.source is None else "ts_rank_cd")
            if request.use_hybrid
            else None
        ),
        timings_ms=timings,
        warnings=warnings,
    )


def chunk_result(
    chunk: ScoredChunk, fused_score: float | None = None, rerank_score: float | None = None
) -> ChunkResult:
    """A chunk as a result, with its fused and rerank scores when it has them."""
    # A row of an attached table has its own id and no chunk index.
    place = (
        {"documentId": chunk.document_id, "chunkIndex": chunk.chunk_index}
        if chunk.row_id is None
        else {"documentId": chunk.document_id}
    )
    return ChunkResult(
        id=chunk.chunk_id,
        content=chunk.content,
        score=chunk.score,
        metadata={**chunk.metadata, **place},
        keyword_score=chunk.keyword_score if fused_score is not None else None,
        fused_score=fused_score,
        rerank_score=rerank_score,
    )


def is_complete(response: RetrieveResponse | SimilaritySearchResponse) -> bool:
    """False for an answer a failing stage degraded: it is not cached, so the next request tries again.

    A note on how the keyword query was bounded is no failure: the same request gets it every time.
    """
    if not isinstance(response, RetrieveResponse):
        return True
    return all(is_keyword_note(warning) for warning in response.pipeline.warnings)
