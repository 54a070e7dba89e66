"""The SQL of the retrieval core. Every value a caller sends is a bound parameter.

Two integers are composed into SQL text with `sql.Literal`: a store's id and its
dimension. Both come from our own `stores` table, never from a request, and must be
literals so the planner can match the store's partial HNSW index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, Literal, get_args

from pgvector import Vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..filters import Predicate
from ..index_knobs import IndexKnobs
from ..ranking import ScoredChunk, similarity_from_distance
from .connection import Connection

# How a store's index holds its embeddings: 4-byte floats, or 2-byte floats (half the index size).
Storage = Literal["vector", "halfvec"]
STORAGE_TYPES: tuple[Storage, ...] = get_args(Storage)


@dataclass(frozen=True, slots=True)
class Store:
    """A row of `stores`."""

    id: int
    name: str
    display_name: str
    embedding_model: str
    dimension: int
    version: int
    storage: Storage = "vector"
    # The store definition's own allow-list of metadata keys (None: every key the service allows).
    allowed_metadata_keys: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk ready to write."""

    document_id: str
    chunk_index: int
    content: str
    metadata: dict[str, Any]
    embedding: Sequence[float]


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """A document and all of its chunks; written together or not at all."""

    id: str
    title: str
    metadata: dict[str, Any]
    content_sha256: str
    chunks: list[ChunkRow]


_STORE_COLUMNS = "id, name, display_name, embedding_model, dimension, version, storage, allowed_metadata_keys"
# The store named `%(n)s`, by name first, else by display name.
_STORE_BY_NAME = (
    "FROM stores WHERE name = %(n)s OR display_name = %(n)s ORDER BY name = %(n)s DESC, id LIMIT 1"
)


def _store(row: tuple[Any, ...]) -> Store:
    id_, name, display_name, model, dimension, version, storage, allowed = row
    keys = tuple(allowed) if allowed is not None else None
    return Store(id_, name, display_name, model, dimension, version, storage, keys)


def find_store(conn: Connection, name: str) -> Store | None:
    """The store called `name`, or whose display name is `name`."""
    row = conn.execute(
        f"SELECT {_STORE_COLUMNS} {_STORE_BY_NAME}",
        {"n": name},
    ).fetchone()
    return _store(row) if row else None


def list_stores(conn: Connection) -> list[Store]:
    """Every store, oldest first."""
    return [_store(r) for r in conn.execute(f"SELECT {_STORE_COLUMNS} FROM stores ORDER BY id")]  # noqa: S608


def embedding_expression(store: Store) -> sql.Composed:
    """`embedding::vector(dim)` or `embedding::halfvec(dim)`: what the store's index is built on.

    Queries must order by exactly this expression for the planner to use the index.
    """
    if store.storage not in STORAGE_TYPES:
        raise ValueError(f"unknown storage {store.storage!r}")
    return sql.SQL("embedding::{type}({dim})").format(
        type=sql.SQL(store.storage), dim=sql.Literal(store.dimension)
    )


def _query_vector(store: Store) -> sql.Composable:
    # The parameter travels as a vector; a halfvec store compares halfvecs.
    if store.storage == "halfvec":
        return sql.SQL("%(query_vector)s::halfvec({dim})").format(dim=sql.Literal(store.dimension))
    return sql.SQL("%(query_vector)s")


def create_store(
    conn: Connection,
    name: str,
    display_name: str,
    embedding_model: str,
    dimension: int,
    storage: Storage = "vector",
) -> Store:
    """Create a store and its partial HNSW index; return the existing one if it already exists."""
    with conn.transaction():
        row = conn.execute(
            f"""INSERT INTO stores (name, display_name, embedding_model, dimension, storage)
                VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING
                RETURNING {_STORE_COLUMNS}""",  # noqa: S608
            (name, display_name, embedding_model, dimension, storage),
        ).fetchone()
        if row is None:
            existing = find_store(conn, name)
            assert existing is not None
            return existing
        store = _store(row)
        conn.execute(create_index_statement(store))
        conn.execute(create_metadata_index_statement(store))
        return store


def create_index_statement(store: Store) -> sql.Composed:
    """CREATE INDEX of the store's partial HNSW index (cosine distance on `embedding_expression`)."""
    return sql.SQL(
        "CREATE INDEX {index} ON chunks USING hnsw (({expr}) {ops}) WHERE store_id = {store_id}"
    ).format(
        index=sql.Identifier(index_name(store)),
        expr=embedding_expression(store),
        ops=sql.SQL(f"{store.storage}_cosine_ops"),
        store_id=sql.Literal(store.id),
    )


def create_metadata_index_statement(store: Store) -> sql.Composed:
    """CREATE INDEX of the store's partial GIN index on metadata, the exact path's way to its rows.

    Partial, like the HNSW index: a filter's rows of this store come from one bitmap, with no
    bitmap of the whole store (store_id = n) to AND with it.
    """
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {index} ON chunks USING gin (metadata jsonb_path_ops)"
        " WHERE store_id = {store_id}"
    ).format(index=sql.Identifier(metadata_index_name(store)), store_id=sql.Literal(store.id))


def metadata_index_name(store: Store) -> str:
    """Name of the store's GIN index on metadata."""
    return f"chunks_metadata_gin_store_{store.id}"


def index_name(store: Store) -> str:
    """Name of the store's HNSW index."""
    return f"chunks_embedding_hnsw_store_{store.id}"


def drop_store(conn: Connection, store: Store) -> None:
    """Delete a store with all its documents, chunks and its index."""
    with conn.transaction():
        conn.execute("DELETE FROM stores WHERE id = %s", (store.id,))
        for name in (index_name(store), metadata_index_name(store)):
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {index}").format(index=sql.Identifier(name)))


def existing_hashes(conn: Connection, store: Store, document_ids: Sequence[str]) -> dict[str, str]:
    """Content hashes of those of `document_ids` already stored."""
    rows = conn.execute(
        "SELECT id, content_sha256 FROM documents WHERE store_id = %s AND id = ANY(%s::text[])",
        (store.id, list(document_ids)),
    )
    return dict(rows.fetchall())


def replace_documents(conn: Connection, store: Store, documents: Sequence[DocumentRow]) -> int | None:
    """Write `documents` in one transaction: each one's old chunks go and its new ones come at once.

    Returns the store's new version (None when there was nothing to write).
    """
    if not documents:
        return None
    with conn.transaction():
        ids = [d.id for d in documents]
        # Writers of the same document take turns, whether or not it exists yet; sorted ids avoid deadlocks.
        conn.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(id)) FROM unnest(%s::text[]) AS id ORDER BY id",
            (store.id, sorted(ids)),
        )
        conn.execute(
            "DELETE FROM chunks WHERE store_id = %s AND document_id = ANY(%s::text[])", (store.id, ids)
        )
        with conn.cursor() as cur:
            cur.executemany(
                """INSERT INTO documents (store_id, id, source, title, metadata, content_sha256, chunk_count)
                   VALUES (%s, %s, %s, %s, %s, %s, %s)
                   ON CONFLICT (store_id, id) DO UPDATE SET title = EXCLUDED.title,
                       metadata = EXCLUDED.metadata, content_sha256 = EXCLUDED.content_sha256,
                       chunk_count = EXCLUDED.chunk_count, updated_at = now()""",
                [
                    (store.id, d.id, d.id, d.title, Jsonb(d.metadata), d.content_sha256, len(d.chunks))
                    for d in documents
                ],
            )
            with cur.copy(
                "COPY chunks (store_id, document_id, chunk_index, content, metadata, embedding) FROM STDIN"
            ) as copy:
                for document in documents:
                    for chunk in document.chunks:
                        copy.write_row(
                            (
                                store.id,
                                chunk.document_id,
                                chunk.chunk_index,
                                chunk.content,
                                Jsonb(chunk.metadata),
                                Vector(list(chunk.embedding)),
                            )
                        )
        return bump_version(conn, store)


def delete_documents(
    conn: Connection, store: Store, document_ids: Sequence[str]
) -> tuple[list[str], int | None]:
    """Delete documents and their chunks; return the ids that existed and the store's new version."""
    with conn.transaction():
        rows = conn.execute(
            "DELETE FROM documents WHERE store_id = %s AND id = ANY(%s::text[]) RETURNING id",
            (store.id, list(document_ids)),
        ).fetchall()
        version = bump_version(conn, store) if rows else None
    return [r[0] for r in rows], version


def bump_version(conn: Connection, store: Store) -> int:
    """Mark the store as changed, so answers cached for an older version are never served."""
    row = conn.execute(
        "UPDATE stores SET version = nextval('store_versions'), updated_at = now()"
        " WHERE id = %s RETURNING version",
        (store.id,),
    ).fetchone()
    assert row is not None
    return int(row[0])


def count_chunks(conn: Connection, store: Store) -> int:
    """How many chunks the store holds."""
    row = conn.execute("SELECT count(*) FROM chunks WHERE store_id = %s", (store.id,)).fetchone()
    return int(row[0]) if row else 0


def _filters(where_sql: str) -> sql.Composable:
    return sql.SQL(" AND ({})").format(sql.SQL(where_sql)) if where_sql else sql.SQL("")


def _distance(store: Store) -> sql.Composed:
    return sql.SQL("{expr} <=> {query}").format(expr=embedding_expression(store), query=_query_vector(store))


def _embedding_column(store: Store, with_embeddings: bool, table: str = "") -> sql.Composable:
    # The stored vector at full precision, for MMR (a halfvec store keeps full precision in the table).
    if not with_embeddings:
        return sql.SQL("")
    return sql.SQL(", {table}embedding::vector({dim}) AS embedding").format(
        table=sql.SQL(table), dim=sql.Literal(store.dimension)
    )


def nearest_chunks_query(
    store: Store, where: Predicate, exact: bool = False, with_embeddings: bool = False
) -> sql.Composed:
    """The top-k query (composed once per store and filter shape: composing costs ~0.1 ms a request)."""
    return _nearest_chunks_query(store, where.sql, exact, with_embeddings)


@lru_cache(maxsize=256)
def _nearest_chunks_query(store: Store, where_sql: str, exact: bool, with_embeddings: bool) -> sql.Composed:
    """The top-k query.

    Approximate: HNSW (iterative scan) inside a materialised CTE, then an exact re-sort, since
    relaxed_order may return rows slightly out of order. Exact: every chunk matching `where`
    (found through the filter's own index), its distance computed, the k nearest kept; the CTE
    has no ORDER BY, so the HNSW index cannot be used.
    """
    if exact:
        template = """WITH nearest AS MATERIALIZED (
               SELECT document_id, chunk_index, content, metadata{embedding}, {distance} AS distance
               FROM chunks
               WHERE store_id = {store_id}{filters})
           SELECT * FROM nearest ORDER BY distance, document_id, chunk_index LIMIT %(limit)s"""
    else:
        template = """WITH nearest AS MATERIALIZED (
               SELECT document_id, chunk_index, content, metadata{embedding}, {distance} AS distance
               FROM chunks
               WHERE store_id = {store_id}{filters}
               ORDER BY {distance}
               LIMIT %(limit)s)
           SELECT * FROM nearest ORDER BY distance, document_id, chunk_index"""
    return sql.SQL(template).format(
        distance=_distance(store),
        store_id=sql.Literal(store.id),
        filters=_filters(where_sql),
        embedding=_embedding_column(store, with_embeddings),
    )


# Natural-language queries should match chunks with any of their words, ranked by how well they
# cover them: websearch_to_tsquery ANDs every word, so its ANDs between positive terms become ORs.
# Quoted phrases stay phrases; a -word keeps its AND, binding to the term before it.
_KEYWORD_QUERY = (
    "regexp_replace(websearch_to_tsquery('english', %(query_text)s)::text, ' & (?!!)', ' | ', 'g')::tsquery"
)


def hybrid_chunks_query(store: Store, where: Predicate, with_embeddings: bool = False) -> sql.Composed:
    """Vector hits and full-text hits of one query in one round trip, each list `limit` long.

    Rows: the union of both lists, each with its exact distance, its `ts_rank_cd` keyword score (NULL
    when the full-text query does not match it) and whether it is a vector hit. Fusion happens in Python.
    """
    return sql.SQL(
        """WITH vector_hits AS MATERIALIZED (
               SELECT document_id, chunk_index
               FROM chunks
               WHERE store_id = {store_id}{filters}
               ORDER BY {distance}
               LIMIT %(limit)s),
           keyword_hits AS MATERIALIZED (
               SELECT document_id, chunk_index, ts_rank_cd(tsv, keywords.q) AS keyword_score
               FROM chunks, (SELECT {keyword_query} AS q) AS keywords
               WHERE store_id = {store_id}{filters} AND tsv @@ keywords.q
               ORDER BY keyword_score DESC, document_id, chunk_index
               LIMIT %(limit)s),
           hits AS (
               SELECT document_id, chunk_index, k.keyword_score, v.document_id IS NOT NULL AS vector_hit
               FROM vector_hits v FULL JOIN keyword_hits k USING (document_id, chunk_index))
           SELECT c.document_id, c.chunk_index, c.content, c.metadata, c.{distance} AS distance,
                  hits.keyword_score, hits.vector_hit{embedding}
           FROM hits JOIN chunks c ON c.store_id = {store_id}
               AND c.document_id = hits.document_id AND c.chunk_index = hits.chunk_index
           ORDER BY distance, c.document_id, c.chunk_index"""
    ).format(
        distance=_distance(store),
        store_id=sql.Literal(store.id),
        filters=_filters(where.sql),
        embedding=_embedding_column(store, with_embeddings, "c."),
        keyword_query=sql.SQL(_KEYWORD_QUERY),
    )


def matching_rows_query(store: Store, where: Predicate) -> sql.Composed:
    """The planner's estimate of how many chunks satisfy `where` (EXPLAIN: planned, not run)."""
    return sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM chunks WHERE store_id = {store_id}{filters}").format(
        store_id=sql.Literal(store.id), filters=_filters(where.sql)
    )


def use_exact_search(conn: Connection, store: Store, where: Predicate, max_rows: int) -> bool:
    """True when `where` is a filter the planner expects at most `max_rows` chunks to satisfy.

    Such a filter is answered exactly: its rows are found through the filter's own index (GIN on
    metadata, the primary key for document ids), so this turns bitmap scans on for the rest of
    the transaction. The estimate costs one planning round trip and reads no rows, whatever the
    filter matches; a bounded count would read up to max_rows rows on every filtered request.
    """
    if not where.sql or max_rows <= 0:
        return False
    plan = conn.execute(matching_rows_query(store, where), where.params).fetchone()
    assert plan is not None
    if float(plan[0][0]["Plan"]["Plan Rows"]) > max_rows:
        return False
    allow_bitmap_scans(conn)
    return True


def allow_bitmap_scans(conn: Connection) -> None:
    """Let the exact query reach its rows through the filter's index (SET LOCAL)."""
    conn.execute("SELECT set_config('enable_bitmapscan', 'on', true)")


def search_params(query_vector: Sequence[float], limit: int, where: Predicate) -> dict[str, Any]:
    """Parameters of `nearest_chunks_query`."""
    return {"query_vector": Vector(list(query_vector)), "limit": limit, **where.params}


# set_config(name, value, true) is SET LOCAL: the value holds until the transaction ends, so a
# pooled connection never carries one request's knobs into the next.
_SEARCH_OPTIONS = """set_config('hnsw.ef_search', %(ef_search)s, true),
       set_config('hnsw.iterative_scan', %(iterative_scan)s, true),
       set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s, true),
       set_config('enable_seqscan', 'off', true),
       set_config('enable_bitmapscan', 'off', true)"""


def _search_options(knobs: IndexKnobs) -> dict[str, str]:
    return {
        "ef_search": str(knobs.ef_search),
        "iterative_scan": knobs.iterative_scan,
        "max_scan_tuples": str(knobs.max_scan_tuples),
    }


def set_search_options(conn: Connection, knobs: IndexKnobs) -> None:
    """Per-transaction planner settings for the top-k query.

    Iterative scans keep a filtered HNSW scan going until k rows pass the filter.
    pgvector's cost estimate grows with ef_search, so on stores of a few thousand rows
    the planner would pick a full scan that is ~8x slower than the index (measured in
    docs/benchmarks.md); sequential scans are therefore off. Bitmap scans are off too:
    without a filter the only one walks the whole store by primary key, and with one the
    planner could trade the index for sorting a large filtered set. `use_exact_search`
    turns them back on when a filter is selective enough for the exact path.
    """
    conn.execute(f"SELECT {_SEARCH_OPTIONS}", _search_options(knobs))


def find_store_for_search(conn: Connection, name: str, knobs: IndexKnobs) -> Store | None:
    """Like `find_store`, and applies `set_search_options` in the same round trip (call in a transaction)."""
    row = conn.execute(
        f"SELECT {_STORE_COLUMNS}, {_SEARCH_OPTIONS} {_STORE_BY_NAME}",
        {"n": name, **_search_options(knobs)},
    ).fetchone()
    return _store(row[: len(fields(Store))]) if row else None


def nearest_chunks(
    conn: Connection,
    store: Store,
    query_vector: Sequence[float],
    limit: int,
    where: Predicate,
    exact: bool = False,
    with_embeddings: bool = False,
) -> list[ScoredChunk]:
    """The `limit` chunks nearest to `query_vector` that satisfy `where`, nearest first.

    Run inside a transaction whose search options are set. When a filtered index scan comes
    back short (it gave up after hnsw.max_scan_tuples, or iterative scans are off), the exact
    scan answers instead: `limit` rows whenever at least `limit` chunks match.
    """
    params = search_params(query_vector, limit, where)
    with conn.cursor(row_factory=dict_row) as cur:
        query = nearest_chunks_query(store, where, exact, with_embeddings)
        rows = cur.execute(query, params).fetchall()
        if len(rows) < limit and where.sql and not exact:
            allow_bitmap_scans(conn)
            query = nearest_chunks_query(store, where, exact=True, with_embeddings=with_embeddings)
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
) -> list[ScoredChunk]:
    """The union of the `limit` nearest chunks and the `limit` best full-text matches, nearest first.

    Run inside a transaction whose search options are set. The full-text side reads the GIN index on
    the tsvector, which only a bitmap scan can use, so bitmap scans are turned on (SET LOCAL).
    """
    allow_bitmap_scans(conn)
    params = {**search_params(query_vector, limit, where), "query_text": query_text}
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(hybrid_chunks_query(store, where, with_embeddings), params).fetchall()
    return [_scored(r) for r in rows]


def _scored(row: dict[str, Any]) -> ScoredChunk:
    embedding = row.get("embedding")
    return ScoredChunk(
        document_id=row["document_id"],
        chunk_index=row["chunk_index"],
        content=row["content"],
        score=similarity_from_distance(row["distance"]),
        metadata=row["metadata"],
        embedding=embedding.to_list() if embedding is not None else None,
        keyword_score=row.get("keyword_score"),
        vector_hit=row.get("vector_hit", True),
    )


def ping(conn: Connection) -> None:
    """A round trip to the server."""
    conn.execute("SELECT 1")
