"""The search SQL of an attached store: the user's relation, its columns renamed to ours.

The relation is read through a subquery that gives the mapped columns the names the rest of the search
uses (`id`, `document_id`, `content`, `embedding`, `metadata`, `title`), so the filter compiler's output
(which names `metadata` and `document_id`) applies unchanged. PostgreSQL pulls such a subquery up into
the outer query, so `ORDER BY embedding <=> q LIMIT k` is still an index scan of an HNSW index on the
base column and `metadata @> ...` still reads a GIN index on it (checked with EXPLAIN when a store is
attached: `catalog.serving_index`). Every name is quoted with sql.Identifier after the catalog has
confirmed it; every value (a collection id, metadata key names) is a bound parameter.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from retrieval_core.db.attached_source import AttachedSource
from retrieval_core.db.connection import Connection
from retrieval_core.db.scored_chunk import ScoredChunk, similarity_from_distance
from retrieval_core.db.vectors import Vector, as_floats
from retrieval_core.filters.predicate import Predicate


def relation(source: AttachedSource, embedding_cast: bool | None = None) -> sql.Composed:
    """`(SELECT ... FROM "schema"."table" [WHERE scope]) AS chunks`, with our column names.

    `embedding_cast` overrides the source's choice (the catalog tries both before it knows).
    """
    columns = source.columns
    cast = source.embedding_cast if embedding_cast is None else embedding_cast
    embedding: sql.Composable = sql.Identifier(columns.embedding)
    if cast:
        embedding = sql.SQL("{}::{}({})").format(
            embedding, sql.SQL(source.vector_type), sql.Literal(source.dimension)
        )
    selected = [
        sql.SQL("{} AS row_key").format(sql.Identifier(columns.id)),
        sql.SQL("{}::text AS id").format(sql.Identifier(columns.id)),
        _document_id(source),
        sql.SQL("{}::text AS content").format(sql.Identifier(columns.content)),
        sql.SQL("{} AS embedding").format(embedding),
        sql.SQL("{} AS metadata").format(_metadata(source)),
        sql.SQL("{}::text AS title").format(sql.Identifier(columns.title))
        if columns.title
        else sql.SQL("NULL::text AS title"),
        sql.SQL("{} AS fulltext").format(sql.Identifier(columns.fulltext))
        if columns.fulltext
        else sql.SQL("NULL::tsvector AS fulltext"),
    ]
    scope = (
        sql.SQL(" WHERE {} = %(attached_scope)s").format(sql.Identifier(source.scope.column))
        if source.scope is not None
        else sql.SQL("")
    )
    return sql.SQL("(SELECT {columns} FROM {schema}.{table}{scope}) AS chunks").format(
        columns=sql.SQL(", ").join(selected),
        schema=sql.Identifier(source.schema),
        table=sql.Identifier(source.table),
        scope=scope,
    )


def _document_id(source: AttachedSource) -> sql.Composable:
    columns = source.columns
    if columns.document_key is not None and columns.metadata is not None:
        # A writable preset's document id is a key of its (json or jsonb) metadata column.
        return sql.SQL("({}::jsonb ->> %(attached_document_key)s) AS document_id").format(
            sql.Identifier(columns.metadata)
        )
    return sql.SQL("{}::text AS document_id").format(sql.Identifier(columns.document_id or columns.id))


def _metadata(source: AttachedSource) -> sql.Composable:
    columns = source.columns
    if source.metadata_kind == "jsonb":
        assert columns.metadata is not None
        return sql.Identifier(columns.metadata)
    if source.metadata_kind == "json":
        assert columns.metadata is not None
        return sql.SQL("coalesce({}::jsonb, '{{}}'::jsonb)").format(sql.Identifier(columns.metadata))
    if source.metadata_kind == "columns":
        pairs = [
            sql.SQL("%(attached_key_{})s::text, {}").format(sql.SQL(str(i)), sql.Identifier(name))
            for i, name in enumerate(columns.metadata_columns)
        ]
        return sql.SQL("jsonb_build_object({})").format(sql.SQL(", ").join(pairs))
    return sql.SQL("'{}'::jsonb")


def relation_params(source: AttachedSource) -> dict[str, Any]:
    """The values `relation` binds: the scope's value and the metadata key names."""
    params: dict[str, Any] = {
        f"attached_key_{i}": name for i, name in enumerate(source.columns.metadata_columns)
    }
    if source.scope is not None:
        params["attached_scope"] = source.scope.value
    if source.columns.document_key is not None:
        params["attached_document_key"] = source.columns.document_key
    return params


def query_vector(source: AttachedSource) -> sql.Composable:
    """The query vector parameter, typed as the column (a halfvec column compares halfvecs)."""
    if source.vector_type == "halfvec":
        return sql.SQL("%(query_vector)s::halfvec({})").format(sql.Literal(source.dimension))
    return sql.SQL("%(query_vector)s")


def _filters(where_sql: str) -> sql.Composable:
    return sql.SQL(" WHERE {}").format(sql.SQL(where_sql)) if where_sql else sql.SQL("")


@lru_cache(maxsize=256)
def nearest_query(source: AttachedSource, where_sql: str, exact: bool, with_embeddings: bool) -> sql.Composed:
    """The top-k query, as `search_sql.nearest_chunks_query` for our own chunks.

    Approximate: the HNSW index (iterative scan) inside a materialised CTE, then an exact re-sort.
    Exact: every matching row's distance, the k nearest kept; OFFSET 0 keeps the inner query apart so
    its ORDER BY cannot become an index scan.
    """
    embedding = sql.SQL(", embedding::vector AS embedding") if with_embeddings else sql.SQL("")
    if exact:
        template = """SELECT * FROM (
                SELECT id, document_id, content, metadata, title{embedding}, embedding <=> {query} AS distance
                FROM {relation}{filters}
                OFFSET 0) AS matching
            ORDER BY distance, id
            LIMIT %(limit)s"""
    else:
        template = """WITH nearest AS MATERIALIZED (
                SELECT id, document_id, content, metadata, title{embedding}, embedding <=> {query} AS distance
                FROM {relation}{filters}
                ORDER BY embedding <=> {query}
                LIMIT %(limit)s)
            SELECT * FROM nearest ORDER BY distance, id"""
    return sql.SQL(template).format(
        embedding=embedding,
        query=query_vector(source),
        relation=relation(source),
        filters=_filters(where_sql),
    )


def nearest(
    conn: Connection,
    source: AttachedSource,
    vector: Sequence[float],
    limit: int,
    where: Predicate,
    exact: bool,
    with_embeddings: bool = False,
) -> list[ScoredChunk]:
    """The `limit` rows nearest to `vector` that satisfy `where`, nearest first.

    Run in a transaction whose search options are set. A filtered index scan that comes back short is
    answered again by the exact scan, as for our own stores.
    """
    params = {**relation_params(source), **where.params, "query_vector": Vector(list(vector)), "limit": limit}
    if exact:
        _allow_bitmap_scans(conn)
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(nearest_query(source, where.sql, exact, with_embeddings), params).fetchall()
        if len(rows) < limit and where.sql and not exact:
            _allow_bitmap_scans(conn)
            rows = cur.execute(nearest_query(source, where.sql, True, with_embeddings), params).fetchall()
    return [_scored(row) for row in rows]


# The query's words ORed, phrases and -exclusions kept: the keyword query of db/search_sql.py.
_KEYWORD_QUERY = (
    "regexp_replace(websearch_to_tsquery(%(text_search)s::regconfig, %(query_text)s)::text,"
    " ' & (?!!)', ' | ', 'g')::tsquery"
)


_VECTOR_HITS = "SELECT row_key FROM {relation}{filters} ORDER BY embedding <=> {query} LIMIT %(limit)s"
_EXACT_VECTOR_HITS = """SELECT row_key FROM (
                   SELECT row_key, id, embedding <=> {query} AS distance
                   FROM {relation}{filters} OFFSET 0) AS m
               ORDER BY distance, id LIMIT %(limit)s"""


@lru_cache(maxsize=256)
def hybrid_query(source: AttachedSource, where_sql: str, exact: bool, with_embeddings: bool) -> sql.Composed:
    """Vector hits and keyword hits (ts_rank_cd on the mapped tsvector column) in one round trip, each list
    `limit` long, as `search_sql.hybrid_chunks_query` for our own chunks. Rows: the union, each with its
    exact distance, its keyword score (NULL when not a keyword hit) and whether it is a vector hit."""
    vector_hits = _EXACT_VECTOR_HITS if exact else _VECTOR_HITS
    template = """WITH vector_hits AS MATERIALIZED ({vector_hits}),
           keyword_query AS MATERIALIZED (SELECT {keyword_query} AS q),
           keyword_hits AS MATERIALIZED (
               SELECT row_key, ts_rank_cd(fulltext, kq.q) AS keyword_score
               FROM {relation}, keyword_query kq
               WHERE fulltext @@ kq.q{and_filters}
               ORDER BY keyword_score DESC, id
               LIMIT %(limit)s),
           hits AS (
               SELECT row_key, k.keyword_score, v.row_key IS NOT NULL AS vector_hit
               FROM vector_hits v FULL JOIN keyword_hits k USING (row_key))
           SELECT chunks.id, chunks.document_id, chunks.content, chunks.metadata, chunks.title{embedding},
                  chunks.embedding <=> {query} AS distance, hits.keyword_score, hits.vector_hit
           FROM hits JOIN {relation} ON chunks.row_key = hits.row_key
           ORDER BY distance, chunks.id"""
    return sql.SQL(template).format(
        vector_hits=sql.SQL(vector_hits).format(
            query=query_vector(source), relation=relation(source), filters=_filters(where_sql)
        ),
        query=query_vector(source),
        relation=relation(source),
        and_filters=sql.SQL(" AND ({})").format(sql.SQL(where_sql)) if where_sql else sql.SQL(""),
        keyword_query=sql.SQL(_KEYWORD_QUERY),
        embedding=sql.SQL(", chunks.embedding::vector AS embedding") if with_embeddings else sql.SQL(""),
    )


def hybrid(
    conn: Connection,
    source: AttachedSource,
    vector: Sequence[float],
    query_text: str,
    limit: int,
    where: Predicate,
    exact: bool,
    with_embeddings: bool = False,
) -> list[ScoredChunk]:
    """The union of the `limit` nearest rows and the `limit` best keyword matches, nearest first.

    The keyword side reads the GIN index of the tsvector column, which only a bitmap scan can use.
    """
    _allow_bitmap_scans(conn)
    params = {
        **relation_params(source),
        **where.params,
        "query_vector": Vector(list(vector)),
        "limit": limit,
        "query_text": query_text,
        "text_search": source.text_search,
    }
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(hybrid_query(source, where.sql, exact, with_embeddings), params).fetchall()
    return [_scored(row) for row in rows]


@lru_cache(maxsize=256)
def keyword_only_query(source: AttachedSource, where_sql: str) -> sql.Composed:
    """The `limit` best keyword matches (ts_rank_cd on the mapped tsvector column), best first."""
    template = """WITH keyword_query AS MATERIALIZED (SELECT {keyword_query} AS q)
           SELECT id, document_id, content, metadata, title, ts_rank_cd(fulltext, kq.q) AS keyword_score
           FROM {relation}, keyword_query kq
           WHERE fulltext @@ kq.q{and_filters}
           ORDER BY keyword_score DESC, id
           LIMIT %(limit)s"""
    return sql.SQL(template).format(
        keyword_query=sql.SQL(_KEYWORD_QUERY),
        relation=relation(source),
        and_filters=sql.SQL(" AND ({})").format(sql.SQL(where_sql)) if where_sql else sql.SQL(""),
    )


def keyword_only(
    conn: Connection, source: AttachedSource, query_text: str, limit: int, where: Predicate
) -> list[ScoredChunk]:
    """The `limit` best keyword matches of `query_text` under `where`, best first, with no similarity."""
    _allow_bitmap_scans(conn)
    params = {
        **relation_params(source),
        **where.params,
        "limit": limit,
        "query_text": query_text,
        "text_search": source.text_search,
    }
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(keyword_only_query(source, where.sql), params).fetchall()
    return [_scored(row) for row in rows]


def count_matching(conn: Connection, source: AttachedSource, where: Predicate, up_to: int) -> int:
    """How many rows satisfy `where`, counting no further than `up_to`."""
    conn.execute(
        "SELECT set_config('enable_bitmapscan', 'on', true), set_config('enable_seqscan', 'on', true)"
    )
    row = conn.execute(
        sql.SQL(
            "SELECT count(*) FROM (SELECT 1 FROM {relation}{filters} LIMIT %(up_to)s) AS matching"
        ).format(relation=relation(source), filters=_filters(where.sql)),
        {**relation_params(source), **where.params, "up_to": up_to},
    ).fetchone()
    conn.execute(
        "SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)"
    )
    assert row is not None
    return int(row[0])


def _allow_bitmap_scans(conn: Connection) -> None:
    # An exact scan reads the filter's rows through its index (bitmap), or all of them (sequential).
    conn.execute(
        "SELECT set_config('enable_bitmapscan', 'on', true), set_config('enable_seqscan', 'on', true)"
    )


def _scored(row: dict[str, Any]) -> ScoredChunk:
    metadata = dict(row["metadata"] or {})
    if row["title"] is not None:
        metadata.setdefault("title", row["title"])
    embedding = row.get("embedding")
    distance = row.get("distance")
    return ScoredChunk(
        document_id=row["document_id"],
        chunk_index=0,
        content=row["content"] or "",
        # A keyword search alone computes no distance.
        score=similarity_from_distance(distance) if distance is not None else None,
        metadata=metadata,
        embedding=as_floats(embedding) if embedding is not None else None,
        keyword_score=row.get("keyword_score"),
        vector_hit=row.get("vector_hit", distance is not None),
        row_id=row["id"],
    )
