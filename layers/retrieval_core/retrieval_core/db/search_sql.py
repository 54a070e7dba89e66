"""The search SQL of the retrieval core. Every value a caller sends is a bound parameter.

Two integers are composed into SQL text with `sql.Literal`: a store's id and its
dimension. Both come from our own `stores` table, never from a request, and must be
literals so the planner can match a large store's partial HNSW index.

A store's keyword and metadata lookups read indexes shared by every store whose keys carry the store
id (migration 12): `keyword_scope(store_id, tsv)` and `chunk_metadata_scope(store_id, metadata)`. While
an upgraded database still builds them (`Store.scoped_indexes` false), the same statements match the
plain columns, which the store's old partial indexes serve.

Store SQL lives in `db.stores`, the keyword statements in `db.keyword_sql`, a filter's forms over
`chunks` in `db.chunk_filters`, document writes and reads in `db.documents`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from functools import lru_cache
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from retrieval_core.db.chunk_filters import allow_bitmap_scans, filters_clause, where_params, where_sql
from retrieval_core.db.connection import Connection
from retrieval_core.db.index_knobs import IndexKnobs
from retrieval_core.db.keyword_sql import inline_keywords, keyword_hits_cte, keyword_params
from retrieval_core.db.scored_chunk import ScoredChunk, similarity_from_distance
from retrieval_core.db.stores import (
    STORE_BY_NAME,
    STORE_COLUMNS,
    Store,
    embedding_expression,
    store_from_row,
)
from retrieval_core.db.vectors import Vector, as_floats
from retrieval_core.filters.predicate import Predicate


def _query_vector(store: Store) -> sql.Composable:
    # The parameter travels as a vector; a halfvec store compares halfvecs.
    if store.storage == "halfvec":
        return sql.SQL("%(query_vector)s::halfvec({dim})").format(dim=sql.Literal(store.dimension))
    return sql.SQL("%(query_vector)s")


def _distance(store: Store) -> sql.Composed:
    return sql.SQL("{expr} <=> {query}").format(expr=embedding_expression(store), query=_query_vector(store))


def _embedding_column(store: Store, with_embeddings: bool, table: str = "") -> sql.Composable:
    # The stored vector at full precision, for MMR (a halfvec store keeps full precision in the table).
    if not with_embeddings:
        return sql.SQL("")
    return sql.SQL(", {table}embedding::vector({dim}) AS embedding").format(
        table=sql.SQL(table), dim=sql.Literal(store.dimension)
    )


def _content_hash_column(store: Store, with_content_hash: bool, document_id: str) -> sql.Composable:
    # The chunk's document's content hash, for collapsing duplicates: one primary-key probe a row.
    if not with_content_hash:
        return sql.SQL("")
    return sql.SQL(
        ", (SELECT d.content_sha256 FROM documents d WHERE d.store_id = {store_id} AND d.id = {document_id})"
        " AS content_sha256"
    ).format(store_id=sql.Literal(store.id), document_id=sql.SQL(document_id))


def nearest_chunks_query(
    store: Store,
    where: Predicate,
    exact: bool = False,
    with_embeddings: bool = False,
    with_content_hash: bool = False,
) -> sql.Composed:
    """The top-k query (composed once per store and filter shape: composing costs ~0.1 ms a request)."""
    # The HNSW scan checks the filter row by row: the plain form, whose estimate comes from the column's
    # statistics (the scoped form's is a default, which made the planner read the store by its primary
    # key instead); the exact scan reaches its rows through the shared index, in the scoped form.
    filters = where_sql(store, where) if exact else where.sql
    # When the shared index alone finds the filter's rows (their keys carry the store id), the store's
    # condition is written so that no index answers it: among 100,000 stores the planner took the
    # scoped containment for a default 0.1% of the table and ANDed it with the store's whole range of
    # the primary key (6,007 entries read for 46 rows, 1.25x the same store alone).
    by_filter = exact and store.scoped_indexes and where.scoped_index_finds_rows
    return _nearest_chunks_query(store, filters, exact, with_embeddings, by_filter, with_content_hash)


@lru_cache(maxsize=256)
def _nearest_chunks_query(
    store: Store, where_sql: str, exact: bool, with_embeddings: bool, by_filter: bool, with_content_hash: bool
) -> sql.Composed:
    """The top-k query.

    Approximate: HNSW (iterative scan) inside a materialised CTE, then an exact re-sort, since
    relaxed_order may return rows slightly out of order. Exact: every chunk matching `where`
    (found through the filter's own index), its distance computed, the k nearest kept.
    """
    if exact:
        # OFFSET 0 keeps the inner query apart, so its ORDER BY cannot become an HNSW scan. Only ids
        # and distances go through the sort; the k winners' content is read afterwards.
        template = """WITH nearest AS MATERIALIZED (
               SELECT document_id, chunk_index, distance
               FROM (SELECT document_id, chunk_index, {distance} AS distance
                     FROM chunks
                     WHERE {store_rows}{filters}
                     OFFSET 0) AS matching
               ORDER BY distance, document_id, chunk_index
               LIMIT %(limit)s)
           SELECT c.document_id, c.chunk_index, c.content, c.metadata{c_embedding}, n.distance{c_hash}
           FROM nearest n JOIN chunks c ON c.store_id = {store_id}
               AND c.document_id = n.document_id AND c.chunk_index = n.chunk_index
           ORDER BY n.distance, c.document_id, c.chunk_index"""
    else:
        template = """WITH nearest AS MATERIALIZED (
               SELECT document_id, chunk_index, content, metadata{embedding}, {distance} AS distance
               FROM chunks
               WHERE store_id = {store_id}{filters}
               ORDER BY {distance}
               LIMIT %(limit)s)
           SELECT nearest.*{n_hash} FROM nearest ORDER BY distance, document_id, chunk_index"""
    return sql.SQL(template).format(
        distance=_distance(store),
        store_id=sql.Literal(store.id),
        filters=filters_clause(where_sql),
        embedding=_embedding_column(store, with_embeddings),
        c_embedding=_embedding_column(store, with_embeddings, "c."),
        c_hash=_content_hash_column(store, with_content_hash, "c.document_id"),
        n_hash=_content_hash_column(store, with_content_hash, "nearest.document_id"),
        store_rows=sql.SQL("store_id + 0 = {}" if by_filter else "store_id = {}").format(
            sql.Literal(store.id)
        ),
    )


def hybrid_chunks_query(
    store: Store, where: Predicate, with_embeddings: bool = False, with_content_hash: bool = False
) -> sql.Composed:
    """Vector hits and keyword hits of one query in one round trip, each list `limit` long.

    Rows: the union of both lists, each with its exact distance, its keyword score (BM25; NULL when the
    keyword query does not match it) and whether it is a vector hit. Fusion happens in Python. Composed
    once per store and filter shape, as `nearest_chunks_query`.
    """
    # The filter row by row, as the HNSW scan's.
    return _hybrid_chunks_query(store, where.sql, with_embeddings, with_content_hash)


@lru_cache(maxsize=256)
def _hybrid_chunks_query(
    store: Store, where_sql: str, with_embeddings: bool, with_content_hash: bool
) -> sql.Composed:
    return sql.SQL(
        """WITH vector_hits AS MATERIALIZED (
               SELECT document_id, chunk_index
               FROM chunks
               WHERE store_id = {store_id}{filters}
               ORDER BY {distance}
               LIMIT %(limit)s),
           {keyword_hits},
           hits AS (
               SELECT document_id, chunk_index, k.keyword_score, v.document_id IS NOT NULL AS vector_hit
               FROM vector_hits v FULL JOIN keyword_hits k USING (document_id, chunk_index))
           SELECT c.document_id, c.chunk_index, c.content, c.metadata, c.{distance} AS distance,
                  hits.keyword_score, hits.vector_hit{embedding}{content_hash}
           FROM hits JOIN chunks c ON c.store_id = {store_id}
               AND c.document_id = hits.document_id AND c.chunk_index = hits.chunk_index
           ORDER BY distance, c.document_id, c.chunk_index"""
    ).format(
        distance=_distance(store),
        store_id=sql.Literal(store.id),
        filters=filters_clause(where_sql),
        embedding=_embedding_column(store, with_embeddings, "c."),
        content_hash=_content_hash_column(store, with_content_hash, "c.document_id"),
        keyword_hits=keyword_hits_cte(store, where_sql),
    )


def count_matching(conn: Connection, store: Store, where: Predicate, up_to: int) -> int:
    """How many chunks satisfy `where`, counting no further than `up_to` (reads at most that many rows).

    A selective filter's rows come through its own index (GIN on metadata, the primary key for
    document ids), which only a bitmap scan can use; a broad filter's come sooner from a sequential
    scan that stops at `up_to` (a bitmap would first collect every match: 63 ms for 100,000 of them,
    against 13 ms). Both scans are allowed for the count, and the planner picks; the count is the same
    whichever it picks. They are off again afterwards.
    """
    _allow_scans(conn, "on")
    row = conn.execute(
        sql.SQL(
            "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE store_id = {store_id}{filters}"
            " LIMIT %(up_to)s) AS matching"
        ).format(store_id=sql.Literal(store.id), filters=filters_clause(where_sql(store, where))),
        {**where_params(store, where), "up_to": up_to},
    ).fetchone()
    _allow_scans(conn, "off")
    assert row is not None
    return int(row[0])


def _allow_scans(conn: Connection, value: str) -> None:
    conn.execute(
        "SELECT set_config('enable_bitmapscan', %(v)s, true), set_config('enable_seqscan', %(v)s, true)",
        {"v": value},
    )


def search_params(
    store: Store, query_vector: Sequence[float], limit: int, where: Predicate
) -> dict[str, Any]:
    """Parameters of `nearest_chunks_query`."""
    return {"query_vector": Vector(list(query_vector)), "limit": limit, **where_params(store, where)}


# set_config(name, value, true) is SET LOCAL: the value holds until the transaction ends, so a
# pooled connection never carries one request's knobs into the next.
_SEARCH_OPTIONS = """set_config('hnsw.ef_search', %(ef_search)s, true),
       set_config('hnsw.iterative_scan', %(iterative_scan)s, true),
       set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s, true),
       set_config('enable_seqscan', 'off', true),
       set_config('enable_bitmapscan', 'off', true),
       set_config('statement_timeout',
                  coalesce(%(statement_timeout)s, current_setting('statement_timeout')), true)"""


def _search_options(knobs: IndexKnobs, statement_timeout_ms: int | None) -> dict[str, str | None]:
    return {
        "ef_search": str(knobs.ef_search),
        "iterative_scan": knobs.iterative_scan,
        "max_scan_tuples": str(knobs.max_scan_tuples),
        "statement_timeout": None if statement_timeout_ms is None else str(statement_timeout_ms),
    }


def set_search_options(conn: Connection, knobs: IndexKnobs, statement_timeout_ms: int | None = None) -> None:
    """Per-transaction planner settings for the top-k query.

    Iterative scans keep a filtered HNSW scan going until k rows pass the filter.
    pgvector's cost estimate grows with ef_search, so on stores of a few thousand rows
    the planner would pick a full scan that is ~8x slower than the index (measured in
    docs/benchmarks.md); sequential scans are therefore off. Bitmap scans are off too:
    without a filter the only one walks the whole store by primary key, and with one the
    planner could trade the index for sorting a large filtered set. The exact path turns them
    back on (`allow_bitmap_scans`). `statement_timeout_ms` bounds the search's statements (SET LOCAL);
    None keeps the connection's.
    """
    conn.execute(f"SELECT {_SEARCH_OPTIONS}", _search_options(knobs, statement_timeout_ms))


def find_store_for_search(
    conn: Connection, name: str, knobs: IndexKnobs, statement_timeout_ms: int | None = None
) -> Store | None:
    """Like `find_store`, and applies `set_search_options` in the same round trip (call in a transaction)."""
    return find_store_with_lexemes(conn, name, knobs, statement_timeout_ms, None)[0]


def find_store_with_lexemes(
    conn: Connection, name: str, knobs: IndexKnobs, statement_timeout_ms: int | None, keyword_text: str | None
) -> tuple[Store | None, bool]:
    """`find_store_for_search` that also says whether `keyword_text` holds a lexeme in the store's text search
    configuration (not only stopwords), in the same round trip. No `keyword_text`: False."""
    row = conn.execute(
        f"SELECT {STORE_COLUMNS}, to_tsvector(text_search, %(keyword_text)s) <> ''::tsvector,"
        f" {_SEARCH_OPTIONS} {STORE_BY_NAME}",
        {"n": name, "keyword_text": keyword_text, **_search_options(knobs, statement_timeout_ms)},
    ).fetchone()
    if row is None:
        return None, False
    width = len(fields(Store))
    return store_from_row(row[:width]), bool(row[width])


def nearest_chunks(
    conn: Connection,
    store: Store,
    query_vector: Sequence[float],
    limit: int,
    where: Predicate,
    exact: bool = False,
    with_embeddings: bool = False,
    with_content_hash: bool = False,
) -> list[ScoredChunk]:
    """The `limit` chunks nearest to `query_vector` that satisfy `where`, nearest first.

    Run inside a transaction whose search options are set. `exact`: scan every chunk matching `where`
    instead of the HNSW index (search_plan.py says when). When a filtered index scan comes
    back short (it gave up after hnsw.max_scan_tuples, or iterative scans are off), the exact
    scan answers instead: `limit` rows whenever at least `limit` chunks match.
    """
    params = search_params(store, query_vector, limit, where)
    if exact:
        allow_bitmap_scans(conn)
    with conn.cursor(row_factory=dict_row) as cur:
        query = nearest_chunks_query(store, where, exact, with_embeddings, with_content_hash)
        rows = cur.execute(query, params).fetchall()
        if len(rows) < limit and where.sql and not exact and store.vector_index:
            allow_bitmap_scans(conn)
            query = nearest_chunks_query(store, where, True, with_embeddings, with_content_hash)
            rows = cur.execute(query, params).fetchall()
    return [_scored(r) for r in rows]


def hybrid_chunks(
    conn: Connection,
    store: Store,
    query_vector: Sequence[float],
    query_text: str,
    limit: int,
    where: Predicate,
    with_embeddings: bool = False,
    with_content_hash: bool = False,
) -> list[ScoredChunk]:
    """The union of the `limit` nearest chunks and the `limit` best keyword matches, nearest first.

    Run inside a transaction whose search options are set. The full-text side reads the GIN index on
    the tsvector, which only a bitmap scan can use, so bitmap scans are turned on (SET LOCAL) for the
    inline keyword statement.
    """
    if inline_keywords(store, where.sql):
        allow_bitmap_scans(conn)
    params = {
        **search_params(store, query_vector, limit, where),
        **keyword_params(store, query_text, limit, where),
    }
    with conn.cursor(row_factory=dict_row) as cur:
        query = hybrid_chunks_query(store, where, with_embeddings, with_content_hash)
        rows = cur.execute(query, params).fetchall()
    return [_scored(r) for r in rows]


def keyword_only_chunks_query(
    store: Store, where: Predicate, with_content_hash: bool = False
) -> sql.Composed:
    """The `limit` best keyword matches with their content, best first: a keyword search alone."""
    return _keyword_only_chunks_query(store, where.sql, with_content_hash)


@lru_cache(maxsize=256)
def _keyword_only_chunks_query(store: Store, where_sql: str, with_content_hash: bool) -> sql.Composed:
    return sql.SQL(
        """WITH {keyword_hits}
           SELECT c.document_id, c.chunk_index, c.content, c.metadata, k.keyword_score{content_hash}
           FROM keyword_hits k JOIN chunks c ON c.store_id = {store_id}
               AND c.document_id = k.document_id AND c.chunk_index = k.chunk_index
           ORDER BY k.keyword_score DESC, c.document_id, c.chunk_index"""
    ).format(
        keyword_hits=keyword_hits_cte(store, where_sql),
        store_id=sql.Literal(store.id),
        content_hash=_content_hash_column(store, with_content_hash, "c.document_id"),
    )


def keyword_only_chunks(
    conn: Connection,
    store: Store,
    query_text: str,
    limit: int,
    where: Predicate,
    with_content_hash: bool = False,
) -> list[ScoredChunk]:
    """The `limit` best keyword matches of `query_text` that satisfy `where`, best first, with no similarity.

    Run inside a transaction whose search options are set; bitmap scans are turned on for the inline
    keyword statement, as in `hybrid_chunks`.
    """
    if inline_keywords(store, where.sql):
        allow_bitmap_scans(conn)
    params = keyword_params(store, query_text, limit, where)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(keyword_only_chunks_query(store, where, with_content_hash), params).fetchall()
    return [_scored(r) for r in rows]


def _scored(row: dict[str, Any]) -> ScoredChunk:
    embedding = row.get("embedding")
    distance = row.get("distance")
    return ScoredChunk(
        document_id=row["document_id"],
        chunk_index=row["chunk_index"],
        content=row["content"],
        # A keyword search alone computes no distance.
        score=similarity_from_distance(distance) if distance is not None else None,
        metadata=row["metadata"],
        embedding=as_floats(embedding) if embedding is not None else None,
        keyword_score=row.get("keyword_score"),
        vector_hit=row.get("vector_hit", distance is not None),
        content_sha256=row.get("content_sha256"),
    )


def ping(conn: Connection) -> None:
    """A round trip to the server."""
    conn.execute("SELECT 1")


def set_statement_timeout(conn: Connection, statement_timeout_ms: int) -> None:
    """Bound the rest of this transaction's statements (SET LOCAL): a search found to be expensive."""
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(statement_timeout_ms),))
