"""The retrieval operations, independent of HTTP and of the runtime."""

from __future__ import annotations

from collections.abc import Sequence

from .db import repository
from .db.connection import Database
from .db.errors import database_errors
from .db.repository import Store
from .embeddings import Embedder
from .exceptions import (
    DatabaseUnavailableError,
    DimensionMismatchError,
    EmbeddingModelMismatchError,
    StoreNotFoundError,
)
from .filters import Predicate, document_ids_in, metadata_equals
from .models import (
    ChunkResult,
    Pipeline,
    RetrieveRequest,
    RetrieveResponse,
    SimilaritySearchRequest,
    SimilaritySearchResponse,
)
from .ranking import ScoredChunk, apply_threshold


class RetrievalService:
    """Embeds queries and searches pgvector. One instance serves many requests."""

    def __init__(self, database: Database, embedder: Embedder, default_store: str, ef_search: int) -> None:
        self.database = database
        self.embedder = embedder
        self.default_store = default_store
        self.ef_search = ef_search

    def get_store(self, name: str | None) -> Store:
        """The store called `name` (or the default one); StoreNotFoundError if there is none."""
        name = name or self.default_store
        with database_errors("looking up the store"), self.database.connection() as conn:
            store = repository.find_store(conn, name)
        if store is None:
            raise StoreNotFoundError(name)
        return store

    def retrieve(self, request: RetrieveRequest) -> RetrieveResponse:
        """Naive engine: embed the query, take the nearest chunks, keep those at or above `grade`."""
        # Embed before touching the database, so a pooled connection is never held during a provider call.
        query_vector = self.embedder.embed([request.query], "query")[0]
        store, candidates = self._search(
            request.store,
            query_vector,
            request.similarity_top_k,
            request.doc_ids,
            request.metadata_filter,
            embedded_by=self.embedder.model,
        )
        kept = apply_threshold(candidates, request.grade)
        return RetrieveResponse(
            results=[_result(c) for c in kept],
            query=request.query,
            total_results=len(kept),
            engine_used="naive",
            store=store.name,
            pipeline=Pipeline(candidates_considered=len(candidates)),
        )

    def similarity_search(self, request: SimilaritySearchRequest) -> SimilaritySearchResponse:
        """The chunks nearest to a precomputed embedding, highest similarity first."""
        store, found = self._search(
            request.store, request.query_embedding, request.top_k, request.doc_ids, request.metadata_filter
        )
        return SimilaritySearchResponse(
            results=[_result(c) for c in found], total_results=len(found), store=store.name
        )

    def _search(
        self,
        store_name: str | None,
        query_vector: Sequence[float],
        limit: int,
        doc_ids: Sequence[str] | None,
        metadata_filter: dict[str, str | int | float | bool] | None,
        embedded_by: str | None = None,
    ) -> tuple[Store, list[ScoredChunk]]:
        """Look the store up and search it on one connection; nearest first."""
        name = store_name or self.default_store
        where: Predicate = document_ids_in(doc_ids) & metadata_equals(metadata_filter)
        with database_errors("searching"), self.database.connection() as conn, conn.transaction():
            store = repository.find_store_for_search(conn, name, self.ef_search, filtered=bool(where.sql))
            if store is None:
                raise StoreNotFoundError(name)
            if embedded_by is not None and store.embedding_model != embedded_by:
                raise EmbeddingModelMismatchError(store.name, store.embedding_model, embedded_by)
            if len(query_vector) != store.dimension:
                raise DimensionMismatchError(store.name, store.dimension, len(query_vector), "query")
            return store, repository.nearest_chunks(conn, store, query_vector, limit, where)

    def database_is_up(self) -> bool:
        """True when PostgreSQL answers a round trip."""
        try:
            with database_errors("checking health"), self.database.connection() as conn:
                repository.ping(conn)
        except DatabaseUnavailableError:
            return False
        return True


def _result(chunk: ScoredChunk) -> ChunkResult:
    return ChunkResult(
        id=chunk.chunk_id,
        content=chunk.content,
        score=chunk.score,
        metadata={**chunk.metadata, "documentId": chunk.document_id, "chunkIndex": chunk.chunk_index},
    )
