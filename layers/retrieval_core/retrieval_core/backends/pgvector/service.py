"""The retrieval operations, independent of HTTP and of the runtime."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any, TypeVar

from retrieval_core.backends.attached.live import LiveSources
from retrieval_core.backends.pgvector import chunk_search
from retrieval_core.backends.pgvector.caching import cache_slot
from retrieval_core.backends.pgvector.neighbours import expanded
from retrieval_core.backends.pgvector.reranking import Rerankers, rerank_strategy, reranked
from retrieval_core.backends.pgvector.response_parts import (
    batch_item,
    fused_scores,
    is_complete,
    retrieve_response,
    search_pipeline,
    similarity_search_response,
)
from retrieval_core.backends.pgvector.timings import stopwatch
from retrieval_core.backends.prompt_context import formatted_if_asked
from retrieval_core.cache.cache_keys import FORMAT_FIELDS
from retrieval_core.cache.json_cache import CacheStatus
from retrieval_core.cache.search_cache import CacheSlot, SearchCache, StoreRef
from retrieval_core.db import search_sql
from retrieval_core.db.connection import Connection, Database
from retrieval_core.db.errors import database_errors
from retrieval_core.db.index_knobs import IndexKnobs
from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.db.stores import Store, find_store
from retrieval_core.embeddings.base import Embedder
from retrieval_core.embeddings.batch import QueryVectors
from retrieval_core.exceptions import (
    InvalidRequestError,
    ResponseTooLargeError,
    RetrievalError,
    StoreNotFoundError,
)
from retrieval_core.filters.predicate import TRUE, Predicate
from retrieval_core.grants import Grant
from retrieval_core.observability.debug import DebugLog
from retrieval_core.search.concurrency import ExpensiveSlots, is_expensive
from retrieval_core.search.duplicates import distinct_candidates
from retrieval_core.search.keyword_query import KeywordQuery, keyword_query_for, no_keyword_note
from retrieval_core.search.plan import FilterSizes
from retrieval_core.search.ranking import apply_threshold, at_least, unit_vector
from retrieval_core.search.reply_size import LAMBDA_PAYLOAD_BYTES, RESPONSE_ENVELOPE_BYTES, lambda_body_bytes
from retrieval_core.settings import IterativeScan

# Imported where used: the write side holds this service but never searches, and skips them at cold start.
if TYPE_CHECKING:
    from retrieval_core.filters.sql import MetadataFilterValue
    from retrieval_core.schemas.retrieve import BatchItem, RetrieveRequest, RetrieveResponse, Timings
    from retrieval_core.schemas.search_options import SearchKnobs
    from retrieval_core.schemas.similarity_search import SimilaritySearchRequest, SimilaritySearchResponse

debug = DebugLog(__name__)

BACKEND = "pgvector"

Request = TypeVar("Request", "RetrieveRequest", "SimilaritySearchRequest")
Response = TypeVar("Response", "RetrieveResponse", "SimilaritySearchResponse")


class RetrievalService:
    """Embeds queries and searches pgvector. One instance serves many requests."""

    def __init__(
        self,
        database: Database,
        embedder: Embedder,
        default_store: str,
        ef_search: int,
        cache: SearchCache | None = None,
        rerankers: Rerankers | None = None,
        allowed_metadata_keys: frozenset[str] | None = None,
        *,
        iterative_scan: IterativeScan = "relaxed_order",
        max_scan_tuples: int = 20_000,
        exact_search_max_rows: int = 20_000,
        search_statement_timeout_ms: int | None = None,
        expensive_statement_timeout_ms: int | None = None,
        expensive_slots: ExpensiveSlots | None = None,
        attached_inspection_ttl_s: float = 60.0,
    ) -> None:
        self.database = database
        self.embedder = embedder
        self.default_store = default_store
        self.cache = cache
        self.rerankers = rerankers
        self.allowed_metadata_keys = allowed_metadata_keys
        self.index_knobs = IndexKnobs(ef_search, iterative_scan, max_scan_tuples)
        self.exact_search_max_rows = exact_search_max_rows
        self.filter_sizes = FilterSizes()
        # Attached tables' indexes, inspected again by a search once older than this (attached/live.py).
        self.live_sources = LiveSources(attached_inspection_ttl_s)
        # None: the connection's own statement timeout (DB_STATEMENT_TIMEOUT_MS).
        self.search_statement_timeout_ms = search_statement_timeout_ms
        self.expensive_statement_timeout_ms = expensive_statement_timeout_ms or search_statement_timeout_ms
        self.expensive_slots = expensive_slots or ExpensiveSlots(limit=2, wait_s=0.5)

    @property
    def ef_search(self) -> int:
        """The service's default hnsw.ef_search."""
        return self.index_knobs.ef_search

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
            store = find_store(conn, name)
        if store is None:
            raise StoreNotFoundError(name)
        return store

    def retrieve(
        self,
        request: RetrieveRequest,
        embed_query: Callable[[str], Sequence[float]] | None = None,
        *,
        grant: Grant,
        depth: int | None = None,
    ) -> tuple[RetrieveResponse, CacheStatus]:
        """Embed the query, search (vector or hybrid), keep chunks at or above `grade`, then rerank.

        `grant` needs the read scope (403) and the store (404, as if unknown). `embed_query`, when given,
        replaces this service's own embedding of `request.query` (the queue function and the batch
        endpoint embed all their queries in one provider call). It is called only when the answer is not
        cached.

        `depth` is internal, for evaluation (`retrieval eval`, `make eval`), and never comes from HTTP:
        it replaces both the candidate count and the reranked result count, past the API's cap of 50, so
        that recall@100 can be measured. Such an answer bypasses the cache, whose keys do not hold it.
        """
        from retrieval_core.schemas.retrieve import RetrieveResponse

        grant.require_scope("read")
        # A bad filter fails here: before a cached answer could bypass ALLOWED_METADATA_KEYS, and unembedded.
        where = self.where_for(request.doc_ids, request.metadata_filter)

        def compute(req: RetrieveRequest) -> RetrieveResponse:
            return self._retrieve(req, where, grant, embed_query, depth)

        if depth is not None:
            answer, status = compute(request), CacheStatus.BYPASS
        else:
            answer, status = self._through_cache("retrieve", request, RetrieveResponse, compute, grant)
        return formatted_if_asked(answer, request), status

    def retrieve_batch(
        self, requests: Sequence[RetrieveRequest | InvalidRequestError], *, grant: Grant
    ) -> list[BatchItem]:
        """Answer each request as `retrieve` would, in order; an error item stays an error item.

        Bodies are parsed, and routed to their backend, by the one entry point (backends/router.py).
        The whole call needs the read scope; each item's store is checked as `retrieve` checks it. The
        queries of every valid item are embedded together, in one provider call, at the first miss.
        """
        grant.require_scope("read")
        # A batch is one expensive request: its searches and embeddings run under one slot.
        with self.expensive_slots.hold():
            return self._retrieve_batch(list(requests), grant)

    def _retrieve_batch(
        self, requests: list[RetrieveRequest | InvalidRequestError], grant: Grant
    ) -> list[BatchItem]:
        # A keyword search embeds nothing: its query stays out of the batch's embedding call.
        valid = [r for r in requests if not isinstance(r, InvalidRequestError)]
        vectors = QueryVectors([r.query for r in valid if r.search_mode != "keyword"])

        def embed(query: str) -> list[float]:
            return vectors.vector_for(query, self.embedder)

        items: list[BatchItem] = []
        # What is left of one Lambda response for the items' answers.
        room = LAMBDA_PAYLOAD_BYTES - RESPONSE_ENVELOPE_BYTES
        for item in requests:
            try:
                if isinstance(item, InvalidRequestError):
                    raise item
                response, _ = self.retrieve(item, embed, grant=grant)
                size = lambda_body_bytes(response.model_dump(mode="json"))
                if size > room:
                    raise ResponseTooLargeError(
                        size, room, "left for it in the batch's Lambda response", "POST /api/v1/rag/retrieve"
                    )
                room -= size
            except RetrievalError as exc:
                items.append(batch_item(exc))
            else:
                items.append(batch_item(response))
        return items

    def similarity_search(
        self, request: SimilaritySearchRequest, *, grant: Grant
    ) -> tuple[SimilaritySearchResponse, CacheStatus]:
        """The chunks nearest to a precomputed embedding, highest first; `grant` as in `retrieve`."""
        from retrieval_core.schemas.similarity_search import SimilaritySearchResponse

        grant.require_scope("read")
        where = self.where_for(request.doc_ids, request.metadata_filter)  # as in `retrieve`

        def compute(req: SimilaritySearchRequest) -> SimilaritySearchResponse:
            return self._similarity_search(req, where, grant)

        answer, status = self._through_cache(
            "similarity-search", request, SimilaritySearchResponse, compute, grant
        )
        return formatted_if_asked(answer, request), status

    def where_for(
        self, doc_ids: Sequence[str] | None, metadata_filter: MetadataFilterValue | None
    ) -> Predicate:
        """The SQL predicate of a request's `docIds` and `metadataFilter`; a bad filter raises (422)."""
        from retrieval_core.filters.sql import document_ids_in, metadata_predicate

        return document_ids_in(doc_ids) & metadata_predicate(metadata_filter, self.allowed_metadata_keys)

    def allowed_keys_for(self, store: Store) -> frozenset[str] | None:
        """The keys a filter on `store` may name: allowed by ALLOWED_METADATA_KEYS and by the store's list."""
        own = frozenset(store.allowed_metadata_keys) if store.allowed_metadata_keys is not None else None
        if own is None or self.allowed_metadata_keys is None:
            return own if own is not None else self.allowed_metadata_keys
        return own & self.allowed_metadata_keys

    def _through_cache(
        self,
        operation: str,
        request: Request,
        response_type: type[Response],
        compute: Callable[[Request], Response],
        grant: Grant,
    ) -> tuple[Response, CacheStatus]:
        # The answer is cached unformatted: formatting (context_packing.py) is applied to it on every serve.
        slot = self.cache_slot(operation, request, grant, exclude=FORMAT_FIELDS)
        if slot.cached is not None:
            return response_type.model_validate(slot.cached), slot.status
        response = compute(request)
        if is_complete(response):
            slot.put(response.model_dump(mode="json", by_alias=True))
        return response, slot.status

    def cache_slot(
        self,
        operation: str,
        request: RetrieveRequest | SimilaritySearchRequest,
        grant: Grant,
        *,
        exclude: frozenset[str] = frozenset(),
        identity: Mapping[str, Any] | None = None,
    ) -> CacheSlot:
        """Where `request`'s answer is cached (backends/pgvector/caching.py): its answer on a hit, else
        where to put it. `identity` joins the key: what else shapes the answer (a generator's provider,
        model and prompt version)."""
        name = request.store or self.default_store

        def current() -> StoreRef:
            found = self.get_store(name)
            return StoreRef(found.name, found.version)

        # The effective knobs, not only the request's overrides: a changed default changes answers too.
        context = {
            "embeddingModel": self.embedder.model,
            **self.knobs_for(request.search).as_dict(),
            "exactSearchMaxRows": self.exact_search_max_rows,
            "rerankers": self.rerankers.identity if self.rerankers is not None else None,
            **(identity or {}),
        }
        options = request.model_dump(mode="json", exclude={"store", *exclude})
        return cache_slot(self.cache, operation, request.cache_ttl_ms, name, current, options, context, grant)

    def _retrieve(
        self,
        request: RetrieveRequest,
        where: Predicate,
        grant: Grant,
        embed_query: Callable[[str], Sequence[float]] | None = None,
        depth: int | None = None,
    ) -> RetrieveResponse:
        from retrieval_core.schemas.retrieve import Timings

        timings = Timings()
        keyword = keyword_query_for(request.query, request.search_mode)
        warnings = [keyword.warning] if keyword.warning is not None else []
        strategy = rerank_strategy(request, self.rerankers)
        mmr_depth = (depth or request.result_count) if strategy == "mmr" else None
        expensive = is_expensive(len(request.query), keyword.terms, mmr_depth)
        with self.expensive_slots.hold() if expensive else nullcontext():
            query_vector: Sequence[float] | None = None  # a keyword search embeds nothing
            if request.search_mode != "keyword":
                # Embed before touching the database: no pooled connection is held during a provider call.
                with stopwatch(timings, "embed"):
                    query_vector = (embed_query or self._embed_query)(request.query)
                model = self.embedder.model
                debug("embed: %d dimensions (%s) in %.1f ms", len(query_vector), model, timings.embed)
            searched: list[Store] = []

            def search(limit: int) -> list[ScoredChunk]:
                store, found = self.search_chunks(
                    request.store,
                    query_vector,
                    limit,
                    where,
                    grant=grant,
                    embedded_by=self.embedder.model,
                    query_text=keyword.text,
                    with_embeddings=strategy == "mmr",
                    knobs=self.knobs_for(request.search),
                    expensive=expensive,
                    warnings=None if searched else warnings,
                    with_content_hash=request.collapse_duplicates,
                )
                searched.append(store)
                return found

            with stopwatch(timings, "search"):
                count = depth or request.candidate_count
                candidates = (
                    distinct_candidates(search, count) if request.collapse_duplicates else search(count)
                )
                store = searched[-1]
            ranked = self._ranked(
                request, strategy, query_vector, store, candidates, timings, warnings, depth, keyword
            )
            return expanded(self.database, store, request, ranked)

    def _ranked(
        self,
        request: RetrieveRequest,
        strategy: str | None,
        query_vector: Sequence[float] | None,
        store: Store,
        candidates: list[ScoredChunk],
        timings: Timings,
        warnings: list[str],
        depth: int | None,
        keyword: KeywordQuery,
    ) -> RetrieveResponse:
        """Fuse, threshold (not in keyword mode: no similarity) and rerank the candidates into the answer."""
        fused = fused_scores(request, candidates)
        debug(
            "search %s: %d candidates (%s) in %.1f ms",
            store.name,
            len(candidates),
            request.fusion if request.use_hybrid else f"{request.search_mode} only",
            timings.search,
        )
        ranked = sorted(candidates, key=lambda c: -fused[c.key]) if fused else candidates
        kept = apply_threshold(ranked, request.grade) if request.grade is not None else ranked
        if request.min_fused_score is not None:
            kept = at_least(kept, fused, request.min_fused_score)
        pipeline = search_pipeline(request, store, candidates, timings, warnings)
        rerank_scores: dict[tuple[str, int], float] = {}
        if request.engine_name == "default":
            if strategy is not None and kept:
                with stopwatch(timings, "rerank"):
                    kept = reranked(
                        request, strategy, query_vector, kept, pipeline, rerank_scores, self.rerankers, depth
                    )
                debug("rerank %s: %d chunks kept in %.1f ms", strategy, len(kept), timings.rerank)
            else:
                debug("rerank: none (%s)", "no strategy" if strategy is None else "nothing to rerank")
            kept = kept[: depth or request.result_count]
        pipeline.timings_ms = timings
        # The words each returned chunk matched: one statement, over the answer's chunks only.
        keyword_mode = request.search_mode != "vector"
        terms = chunk_search.matched_terms_of(self.database, store, keyword, kept) if keyword_mode else None
        return retrieve_response(request, store, kept, fused, rerank_scores, pipeline, terms)

    def _embed_query(self, query: str) -> Sequence[float]:
        return self.embedder.embed([query], "query")[0]

    def _similarity_search(
        self, request: SimilaritySearchRequest, where: Predicate, grant: Grant
    ) -> SimilaritySearchResponse:
        # A caller's vector may have any length; scaling it changes no cosine but keeps pgvector's
        # single-precision arithmetic finite.
        store, found = self.search_chunks(
            request.store,
            unit_vector(request.query_embedding),
            request.top_k,
            where,
            grant=grant,
            knobs=self.knobs_for(request.search),
        )
        debug("similarity search %s: %d chunks", store.name, len(found))
        return similarity_search_response(store, found)

    def search_chunks(
        self,
        store_name: str | None,
        query_vector: Sequence[float] | None,
        limit: int,
        where: Predicate = TRUE,
        *,
        grant: Grant,
        embedded_by: str | None = None,
        query_text: str | None = None,
        with_embeddings: bool = False,
        knobs: IndexKnobs | None = None,
        expensive: bool = False,
        warnings: list[str] | None = None,
        with_content_hash: bool = False,
    ) -> tuple[Store, list[ScoredChunk]]:
        """Look the store up and search it on one connection; nearest first.

        A store outside `grant` is a 404 as if unknown; a filter naming a key outside the store's own
        allowedMetadataKeys (or ALLOWED_METADATA_KEYS) a 422.

        With `query_text`, a hybrid search: the full-text hits of `query_text` join the vector hits (a
        text of stopwords only is not searched: a note goes to `warnings`). Otherwise a filter matching
        few enough chunks is answered by an exact scan (`scans_exactly`). No `query_vector`: a keyword
        search of `query_text` alone, best first, each chunk without a similarity.

        An `expensive` search (cost.py) runs with the shorter statement timeout, in one of the
        process's few expensive slots (none free within the wait: 503 `overloaded`). `with_content_hash`:
        each chunk carries its document's content_sha256, for collapsing duplicates (search/duplicates.py).
        """
        timeout_ms = self.expensive_statement_timeout_ms if expensive else self.search_statement_timeout_ms
        with self.expensive_slots.hold() if expensive else nullcontext():
            return self._search_chunks(
                store_name,
                query_vector,
                limit,
                where,
                grant,
                embedded_by=embedded_by,
                query_text=query_text,
                with_embeddings=with_embeddings,
                knobs=knobs,
                statement_timeout_ms=timeout_ms,
                warnings=warnings,
                with_content_hash=with_content_hash,
            )

    def _search_chunks(
        self,
        store_name: str | None,
        query_vector: Sequence[float] | None,
        limit: int,
        where: Predicate,
        grant: Grant,
        *,
        embedded_by: str | None,
        query_text: str | None,
        with_embeddings: bool,
        knobs: IndexKnobs | None,
        statement_timeout_ms: int | None,
        warnings: list[str] | None,
        with_content_hash: bool = False,
    ) -> tuple[Store, list[ScoredChunk]]:
        from retrieval_core.filters.sql import check_keys

        name = store_name or self.default_store
        with database_errors("searching"), self.database.connection() as conn, conn.transaction():
            # A hybrid query's positive words may all be stopwords of the store's configuration ("the -ab"
            # would then match every chunk without "ab"): checked with the store lookup, no extra trip.
            positive = KeywordQuery(query_text).positive_text if query_text is not None else None
            store, has_lexemes = search_sql.find_store_with_lexemes(
                conn, name, knobs or self.index_knobs, statement_timeout_ms, positive
            )
            if store is None:
                raise StoreNotFoundError(name)
            grant.require_store(store.name, name)
            check_keys(sorted(where.metadata_keys), self.allowed_keys_for(store))
            if query_text is not None and not has_lexemes:
                query_text = None
                if warnings is not None:
                    warnings.append(no_keyword_note(query_vector is None))
            found = chunk_search.search_store(
                conn,
                store,
                query_vector,
                limit,
                where,
                embedded_by=embedded_by,
                query_text=query_text,
                with_embeddings=with_embeddings,
                filter_sizes=self.filter_sizes,
                exact_max_rows=self.exact_search_max_rows,
                live_sources=self.live_sources,
                with_content_hash=with_content_hash,
            )
            return store, found

    def scans_exactly(self, conn: Connection, store: Store, where: Predicate, limit: int) -> bool:
        """Whether the top `limit` of `where` come from an exact scan, not HNSW (chunk_search.py)."""
        return chunk_search.scans_exactly(
            conn, store, where, limit, self.filter_sizes, self.exact_search_max_rows
        )
