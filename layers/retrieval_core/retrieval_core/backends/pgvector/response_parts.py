"""The parts of a pgvector answer: fused scores, the pipeline record, chunk results, and completeness.

The response bodies are imported where they are built (see service.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.db.stores import Store
from retrieval_core.exceptions import RetrievalError
from retrieval_core.schemas.common import ErrorBody
from retrieval_core.search.fusion import Key, fuse
from retrieval_core.search.keyword_query import is_keyword_note

if TYPE_CHECKING:
    from retrieval_core.schemas.results import ChunkResult
    from retrieval_core.schemas.retrieve import (
        BatchItem,
        Pipeline,
        RetrieveRequest,
        RetrieveResponse,
        Timings,
    )
    from retrieval_core.schemas.similarity_search import SimilaritySearchResponse


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
    from retrieval_core.schemas.retrieve import Pipeline

    return Pipeline(
        candidates_considered=len(candidates),
        search_mode=request.search_mode,
        hybrid=request.use_hybrid,
        fusion=request.fusion if request.use_hybrid else None,
        # An attached table's own text column: ts_rank_cd (no IDF statistics of a table we do not write).
        keyword_scorer=(
            ("bm25" if store.keyword_ready and store.source is None else "ts_rank_cd")
            if request.search_mode != "vector"
            else None
        ),
        timings_ms=timings,
        warnings=warnings,
    )


def retrieve_response(
    request: RetrieveRequest,
    store: Store,
    kept: list[ScoredChunk],
    fused: dict[Key, float],
    rerank_scores: dict[Key, float],
    pipeline: Pipeline,
    matched_terms: list[list[str]] | None = None,
) -> RetrieveResponse:
    """The answer to a retrieve: the kept chunks with their scores, and what the pipeline did.

    `matched_terms`: each kept chunk's matched words, in the order of `kept` (keyword and hybrid modes).
    """
    from retrieval_core.schemas.retrieve import RetrieveResponse

    terms: list[list[str] | None] = list(matched_terms) if matched_terms is not None else [None] * len(kept)
    return RetrieveResponse(
        results=[
            chunk_result(c, fused.get(c.key), rerank_scores.get(c.key), words)
            for c, words in zip(kept, terms, strict=True)
        ],
        query=request.query,
        total_results=len(kept),
        engine_used="advanced" if request.engine_name == "default" else "naive",
        store=store.name,
        pipeline=pipeline,
    )


def batch_item(answer: RetrieveResponse | RetrievalError) -> BatchItem:
    """One item of a batch's answer: the request's response, or its error with the error's status."""
    from retrieval_core.schemas.retrieve import BatchItem

    if isinstance(answer, RetrievalError):
        error = ErrorBody(code=answer.code, message=answer.message, details=answer.details)
        return BatchItem(status=answer.status_code, error=error)
    return BatchItem(status=200, response=answer)


def similarity_search_response(store: Store, found: list[ScoredChunk]) -> SimilaritySearchResponse:
    """The answer to a similarity search: the chunks found, nearest first."""
    from retrieval_core.schemas.similarity_search import SimilaritySearchResponse

    return SimilaritySearchResponse(
        results=[chunk_result(c) for c in found], total_results=len(found), store=store.name
    )


def chunk_result(
    chunk: ScoredChunk,
    fused_score: float | None = None,
    rerank_score: float | None = None,
    matched_terms: list[str] | None = None,
) -> ChunkResult:
    """A chunk as a result, with its keyword, fused and rerank scores and matched words when it has them."""
    from retrieval_core.schemas.results import ChunkResult

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
        keyword_score=chunk.keyword_score,
        fused_score=fused_score,
        rerank_score=rerank_score,
        matched_terms=matched_terms,
    )


def is_complete(response: RetrieveResponse | SimilaritySearchResponse) -> bool:
    """False for an answer a failing stage degraded: it is not cached, so the next request tries again.

    A note on how the keyword query was bounded is no failure: the same request gets it every time.
    """
    from retrieval_core.schemas.retrieve import RetrieveResponse

    if not isinstance(response, RetrieveResponse):
        return True
    return all(is_keyword_note(warning) for warning in response.pipeline.warnings)
