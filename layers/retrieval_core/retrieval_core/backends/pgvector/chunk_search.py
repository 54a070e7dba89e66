"""The SQL side of a search on a store already found and checked: attached, hybrid, exact or HNSW."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from retrieval_core.backends.attached.live import LiveSources
from retrieval_core.backends.attached.plan import search_attached
from retrieval_core.db import search_sql
from retrieval_core.db.connection import Connection, Database
from retrieval_core.db.errors import database_errors
from retrieval_core.db.matched_terms import matched_terms
from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.db.stores import Store
from retrieval_core.exceptions import DimensionMismatchError, EmbeddingModelMismatchError
from retrieval_core.filters.predicate import Predicate
from retrieval_core.search.keyword_query import KeywordQuery
from retrieval_core.search.plan import FilterSizes, exact_scan_limit


def search_store(
    conn: Connection,
    store: Store,
    query_vector: Sequence[float] | None,
    limit: int,
    where: Predicate,
    *,
    embedded_by: str | None,
    query_text: str | None,
    with_embeddings: bool,
    filter_sizes: FilterSizes,
    exact_max_rows: int,
    live_sources: LiveSources,
    with_content_hash: bool = False,
) -> list[ScoredChunk]:
    """The chunks of `store` nearest to `query_vector` under `where`, nearest first.

    An attached table is searched by its own plan. With `query_text`, a hybrid search; otherwise a store
    without an HNSW index of its own, or a filter matching few enough chunks, is answered by an exact
    scan (`scans_exactly`). `with_content_hash`: each chunk of our own stores carries its document's
    content_sha256 (an attached table keeps none). No `query_vector`: a keyword search alone, the best
    matches of `query_text` first (none without it).
    """
    if store.source is not None:
        return search_attached(
            conn,
            store,
            query_vector,
            limit,
            where,
            embedded_by=embedded_by,
            query_text=query_text,
            with_embeddings=with_embeddings,
            filter_sizes=filter_sizes,
            exact_max_rows=exact_max_rows,
            live=live_sources,
        )
    if query_vector is None:
        if query_text is None:
            return []
        return search_sql.keyword_only_chunks(conn, store, query_text, limit, where, with_content_hash)
    if embedded_by is not None and store.embedding_model != embedded_by:
        raise EmbeddingModelMismatchError(store.name, store.embedding_model, embedded_by)
    if len(query_vector) != store.dimension:
        raise DimensionMismatchError(store.name, store.dimension, len(query_vector), "query")
    if query_text is not None:
        return search_sql.hybrid_chunks(
            conn, store, query_vector, query_text, limit, where, with_embeddings, with_content_hash
        )
    exact = not store.vector_index or scans_exactly(conn, store, where, limit, filter_sizes, exact_max_rows)
    return search_sql.nearest_chunks(
        conn, store, query_vector, limit, where, exact, with_embeddings, with_content_hash
    )


def matched_terms_of(
    database: Database, store: Store, keyword: KeywordQuery, kept: Sequence[ScoredChunk]
) -> list[list[str]]:
    """The words of each of `kept` that the keyword query's positive terms match, in one statement
    (db/matched_terms.py); [] for each when the query has none."""
    positive = keyword.positive_text
    if not kept or not positive:
        return [[] for _ in kept]
    text_search = store.source.text_search if store.source is not None else store.text_search
    with database_errors("finding the matched terms"), database.connection() as conn:
        return matched_terms(conn, text_search, positive, [c.content for c in kept])


def scans_exactly(
    conn: Connection,
    store: Store,
    where: Predicate,
    limit: int,
    filter_sizes: FilterSizes,
    exact_max_rows: int,
) -> bool:
    """Whether the top `limit` of `where` come from an exact scan rather than the HNSW index.

    Yes when the filter matches at most `exact_scan_limit` chunks, as counted at most a minute ago
    (search/plan.py has the cost model). Never for an unfiltered search.
    """
    if not where.sql:
        return False
    most = exact_scan_limit(store.chunk_count, limit, exact_max_rows)
    if most == 0 or store.chunk_count <= most:
        return most > 0
    key = (store.id, where.sql, _hashable(where.params))
    return filter_sizes.at_most(key, most, lambda up_to: search_sql.count_matching(conn, store, where, up_to))


def _hashable(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)
