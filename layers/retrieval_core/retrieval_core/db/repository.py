"""The SQL of the retrieval core. Every value a caller sends is a bound parameter.

Two integers are composed into SQL text with `sql.Literal`: a store's id and its
dimension. Both come from our own `stores` table, never from a request, and must be
literals so the planner can match the store's partial HNSW index.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

from pgvector import Vector
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from ..filters import Predicate
from ..ranking import ScoredChunk, similarity_from_distance
from .connection import Connection


@dataclass(frozen=True, slots=True)
class Store:
    """A row of `stores`."""

    id: int
    name: str
    display_name: str
    embedding_model: str
    dimension: int
    version: int


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


_STORE_COLUMNS = "id, name, display_name, embedding_model, dimension, version"
# The store named `%(n)s`, by name first, else by display name.
_STORE_BY_NAME = (
    "FROM stores WHERE name = %(n)s OR display_name = %(n)s ORDER BY name = %(n)s DESC, id LIMIT 1"
)


def _store(row: tuple[Any, ...]) -> Store:
    return Store(*row)


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


def create_store(
    conn: Connection, name: str, display_name: str, embedding_model: str, dimension: int
) -> Store:
    """Create a store and its partial HNSW index; return the existing one if it already exists."""
    with conn.transaction():
        row = conn.execute(
            f"""INSERT INTO stores (name, display_name, embedding_model, dimension)
                VALUES (%s, %s, %s, %s) ON CONFLICT (name) DO NOTHING
                RETURNING {_STORE_COLUMNS}""",  # noqa: S608
            (name, display_name, embedding_model, dimension),
        ).fetchone()
        if row is None:
            existing = find_store(conn, name)
            assert existing is not None
            return existing
        store = _store(row)
        conn.execute(
            sql.SQL(
                "CREATE INDEX {index} ON chunks USING hnsw ((embedding::vector({dim})) vector_cosine_ops) "
                "WHERE store_id = {store_id}"
            ).format(
                index=sql.Identifier(f"chunks_embedding_hnsw_store_{store.id}"),
                dim=sql.Literal(store.dimension),
                store_id=sql.Literal(store.id),
            )
        )
        return store


def drop_store(conn: Connection, store: Store) -> None:
    """Delete a store with all its documents, chunks and its index."""
    with conn.transaction():
        conn.execute("DELETE FROM stores WHERE id = %s", (store.id,))
        conn.execute(
            sql.SQL("DROP INDEX IF EXISTS {index}").format(
                index=sql.Identifier(f"chunks_embedding_hnsw_store_{store.id}")
            )
        )


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
                """INSERT INTO documents (store_id, id, title, metadata, content_sha256, chunk_count)
                   VALUES (%s, %s, %s, %s, %s, %s)
                   ON CONFLICT (store_id, id) DO UPDATE SET title = EXCLUDED.title,
                       metadata = EXCLUDED.metadata, content_sha256 = EXCLUDED.content_sha256,
                       chunk_count = EXCLUDED.chunk_count, updated_at = now()""",
                [
                    (store.id, d.id, d.title, Jsonb(d.metadata), d.content_sha256, len(d.chunks))
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


def nearest_chunks_query(store: Store, where: Predicate, with_embeddings: bool = False) -> sql.Composed:
    """The top-k query: HNSW (iterative scan) inside a materialised CTE, then an exact re-sort."""
    filters = sql.SQL(" AND ({})").format(sql.SQL(where.sql)) if where.sql else sql.SQL("")
    embedding = sql.SQL(", embedding::vector({dim}) AS embedding") if with_embeddings else sql.SQL("")
    return sql.SQL(
        """WITH nearest AS MATERIALIZED (
               SELECT document_id, chunk_index, content, metadata{embedding},
                      embedding::vector({dim}) <=> %(query_vector)s AS distance
               FROM chunks
               WHERE store_id = {store_id}{filters}
               ORDER BY embedding::vector({dim}) <=> %(query_vector)s
               LIMIT %(limit)s)
           SELECT * FROM nearest ORDER BY distance, document_id, chunk_index"""
    ).format(
        dim=sql.Literal(store.dimension),
        store_id=sql.Literal(store.id),
        filters=filters,
        embedding=embedding.format(dim=sql.Literal(store.dimension)),
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
    filters = sql.SQL(" AND ({})").format(sql.SQL(where.sql)) if where.sql else sql.SQL("")
    embedding = sql.SQL(", c.embedding::vector({dim}) AS embedding") if with_embeddings else sql.SQL("")
    return sql.SQL(
        """WITH vector_hits AS MATERIALIZED (
               SELECT document_id, chunk_index
               FROM chunks
               WHERE store_id = {store_id}{filters}
               ORDER BY embedding::vector({dim}) <=> %(query_vector)s
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
           SELECT c.document_id, c.chunk_index, c.content, c.metadata,
                  c.embedding::vector({dim}) <=> %(query_vector)s AS distance,
                  hits.keyword_score, hits.vector_hit{embedding}
           FROM hits JOIN chunks c ON c.store_id = {store_id}
               AND c.document_id = hits.document_id AND c.chunk_index = hits.chunk_index
           ORDER BY distance, c.document_id, c.chunk_index"""
    ).format(
        dim=sql.Literal(store.dimension),
        store_id=sql.Literal(store.id),
        filters=filters,
        embedding=embedding.format(dim=sql.Literal(store.dimension)),
        keyword_query=sql.SQL(_KEYWORD_QUERY),
    )


def search_params(query_vector: Sequence[float], limit: int, where: Predicate) -> dict[str, Any]:
    """Parameters of `nearest_chunks_query`."""
    return {"query_vector": Vector(list(query_vector)), "limit": limit, **where.params}


_SEARCH_OPTIONS = """set_config('hnsw.ef_search', %(ef_search)s, true),
       set_config('hnsw.iterative_scan', 'relaxed_order', true),
       set_config('enable_seqscan', 'off', true),
       set_config('enable_bitmapscan', %(bitmapscan)s, true)"""


def _search_options(ef_search: int, filtered: bool) -> dict[str, str]:
    return {"ef_search": str(ef_search), "bitmapscan": "on" if filtered else "off"}


def set_search_options(conn: Connection, ef_search: int, filtered: bool) -> None:
    """Per-transaction planner settings for the top-k query.

    Iterative scans keep a filtered HNSW scan going until k rows pass the filter.
    pgvector's cost estimate grows with ef_search, so on stores of a few thousand rows
    the planner would pick a full scan that is ~8x slower than the index (measured in
    docs/benchmarks.md); sequential scans are therefore off. Without a filter, bitmap
    scans are off too (the only one available walks the whole store by primary key);
    with a filter they stay on, so a selective filter can use its index and an exact sort.
    """
    conn.execute(f"SELECT {_SEARCH_OPTIONS}", _search_options(ef_search, filtered))


def find_store_for_search(conn: Connection, name: str, ef_search: int, filtered: bool) -> Store | None:
    """Like `find_store`, and applies `set_search_options` in the same round trip (call in a transaction)."""
    row = conn.execute(
        f"SELECT {_STORE_COLUMNS}, {_SEARCH_OPTIONS} {_STORE_BY_NAME}",
        {"n": name, **_search_options(ef_search, filtered)},
    ).fetchone()
    return _store(row[: len(fields(Store))]) if row else None


def nearest_chunks(
    conn: Connection,
    store: Store,
    query_vector: Sequence[float],
    limit: int,
    where: Predicate,
    with_embeddings: bool = False,
) -> list[ScoredChunk]:
    """The `limit` chunks nearest to `query_vector` that satisfy `where`, nearest first.

    Run inside a transaction whose search options are set.
    """
    with conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(
            nearest_chunks_query(store, where, with_embeddings), search_params(query_vector, limit, where)
        ).fetchall()
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
    """The union of the `limit` nearest chunks and the `limit` best full-text matches, nearest first."""
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
