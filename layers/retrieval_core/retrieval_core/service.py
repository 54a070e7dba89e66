"""The retrieval operations, independent of HTTP and of the runtime."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from . import metrics
from .cache.json_cache import CacheStatus
from .cache.keys import search_key
from .cache.search_cache import SearchCache, StoreRef
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
from .index_knobs import IndexKnobs, IterativeScan
from .models import (
    ChunkResult,
    Pipeline,
    RetrieveRequest,
    RetrieveResponse,
    SearchKnobs,
    SimilaritySearchRequest,
    SimilaritySearchResponse,
)
from .ranking import ScoredChunk, apply_threshold

BACKEND = "pgvector"

Request = TypeVar("Request", RetrieveRequest, SimilaritySearchRequest)
Response = TypeVar("Response", RetrieveResponse, SimilaritySearchResponse)


class RetrievalService:
    """Embeds queries and searches pgvector. One instance serves many requests."""

    def __init__(
        self,
        database: Database,
        embedder: Embedder,
        default_store: str,
        ef_search: int,
        cache: SearchCache | None = None,
        *,
        iterative_scan: IterativeScan = "relaxed_order",
        max_scan_tuples: int = 20_000,
        exact_search_max_rows: int = 5_000,
    ) -> None:
        self.database = database
        self.embedder = embedder
        self.default_store = default_store
        self.ef_search = ef_search
        self.cache = cache
        self.index_knobs = IndexKnobs(ef_search, iterative_scan, max_scan_tuples)
        self.exact_search_max_rows = exact_search_max_rows

    def knobs_for(self, override: SearchKnobs | None) -> IndexKnobs:
        """The index knobs of a request: the service's, with the request's overrides."""
        if override is None:
            return self.index_knobs
        return self.index_knobs.overridden(
            override.ef_search, override.iterative_scan, override.max_scan_tuples
        )

    def get_store(self, name: str | None) -> Store:
        """The store called `name` (or the default one); StoreNotFoundError if there is none."""
        name = name or self.default_store
        with database_errors("looking up the store"), self.database.connection() as conn:
            store = repository.find_store(conn, name)
        if store is None:
            raise StoreNotFoundError(name)
        return store

    def retrieve(
        self, request: RetrieveRequest, query_vector: Sequence[float] | None = None
    ) -> tuple[RetrieveResponse, CacheStatus]:
        """Naive engine: embed the query, take the nearest chunks, keep those at or above `grade`.

        `query_vector`, when given, must be `request.query` embedded by this service's embedder (the
        queue function embeds a whole batch in one provider call); the query is then not embedded again.
        """

        def compute(req: RetrieveRequest) -> RetrieveResponse:
            return self._retrieve(req, query_vector)

        return self._through_cache("retrieve", request, RetrieveResponse, compute)

    def similarity_search(
        self, request: SimilaritySearchRequest
    ) -> tuple[SimilaritySearchResponse, CacheStatus]:
        """The chunks nearest to a precomputed embedding, highest similarity first."""
        return self._through_cache(
            "similarity-search", request, SimilaritySearchResponse, self._similarity_search
        )

    def publish_store_version(self, store: Store, version: int) -> None:
        """Called after a write commits: cached answers for older versions are no longer served."""
        if self.cache is not None:
            self.cache.publish_version(BACKEND, store.name, version)

    def _through_cache(
        self,
        operation: str,
        request: Request,
        response_type: type[Response],
        compute: Callable[[Request], Response],
    ) -> tuple[Response, CacheStatus]:
        ttl_s = self.cache.ttl_for(request.cache_ttl_ms) if self.cache is not None else None
        if self.cache is None or ttl_s is None:
            return compute(request), CacheStatus.BYPASS
        options = request.model_dump(mode="json", exclude={"store"})
        # The effective knobs, not only the request's overrides: a changed default changes answers too.
        context = {
            "embeddingModel": self.embedder.model,
            **self.knobs_for(request.search).as_dict(),
            "exactSearchMaxRows": self.exact_search_max_rows,
        }

        def key_of(store: StoreRef) -> str:
            return search_key(
                backend=BACKEND,
                store=store.name,
                store_version=store.version,
                operation=operation,
                request=options,
                context=context,
            )

        name = request.store or self.default_store
        store, cached = self.cache.find(BACKEND, name, key_of)
        if store is None:
            found = self.get_store(name)
            store = StoreRef(found.name, found.version)
            self.cache.remember_store(BACKEND, name, store)
            cached = self.cache.get_answer(key_of(store))
        if cached is not None:
            metrics.count("CacheHit")
            return response_type.model_validate(cached), CacheStatus.HIT
        metrics.count("CacheMiss")
        response = compute(request)
        self.cache.put_answer(key_of(store), response.model_dump(mode="json", by_alias=True), ttl_s)
        return response, CacheStatus.MISS

    def _retrieve(
        self, request: RetrieveRequest, query_vector: Sequence[float] | None = None
    ) -> RetrieveResponse:
        # Embed before touching the database, so a pooled connection is never held during a provider call.
        if query_vector is None:
            query_vector = self.embedder.embed([request.query], "query")[0]
        store, candidates = self._search(
            request.store,
            query_vector,
            request.similarity_top_k,
            request.doc_ids,
            request.metadata_filter,
            embedded_by=self.embedder.model,
            knobs=self.knobs_for(request.search),
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

    def _similarity_search(self, request: SimilaritySearchRequest) -> SimilaritySearchResponse:
        store, found = self._search(
            request.store,
            request.query_embedding,
            request.top_k,
            request.doc_ids,
            request.metadata_filter,
            knobs=self.knobs_for(request.search),
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
        knobs: IndexKnobs | None = None,
    ) -> tuple[Store, list[ScoredChunk]]:
        """Look the store up and search it on one connection; nearest first.

        A filter matching at most `exact_search_max_rows` chunks is answered by an exact scan.
        """
        name = store_name or self.default_store
        where: Predicate = document_ids_in(doc_ids) & metadata_equals(metadata_filter)
        with database_errors("searching"), self.database.connection() as conn, conn.transaction():
            store = repository.find_store_for_search(conn, name, knobs or self.index_knobs)
            if store is None:
                raise StoreNotFoundError(name)
            if embedded_by is not None and store.embedding_model != embedded_by:
                raise EmbeddingModelMismatchError(store.name, store.embedding_model, embedded_by)
            if len(query_vector) != store.dimension:
                raise DimensionMismatchError(store.name, store.dimension, len(query_vector), "query")
            exact = repository.use_exact_search(conn, store, where, self.exact_search_max_rows)
            return store, repository.nearest_chunks(conn, store, query_vector, limit, where, exact)

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
