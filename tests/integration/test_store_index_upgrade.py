"""Upgrading a database of schema 11, whose stores each had indexes and a keyword function of their own.

The database is made as schema 11 made it: migrations 1-11, then each store created with the DDL its
creation ran then (below), and written with db/'s own functions, since the service's writer would first
migrate the database. It holds vector and halfvec stores of two dimensions and two text search
configurations, and an attached store. Every answer (dense, filtered, keyword, hybrid) is recorded
before the upgrade and compared after migration 12, after a maintenance run cut short, and after the
one that finishes; the per-store indexes serve until the shared ones are valid, then they are gone.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.types.json import Jsonb

from retrieval_core.backends.attached.catalog import inspect_source
from retrieval_core.backends.attached.definition import source_request
from retrieval_core.db import chunk_filters, keyword_sql, search_sql
from retrieval_core.db.documents import ChunkRow, DocumentRow, replace_documents
from retrieval_core.db.index_knobs import IndexKnobs
from retrieval_core.db.migrations.runner import run_migrations
from retrieval_core.db.migrations.steps import MIGRATIONS
from retrieval_core.db.store_indexes import IndexPolicy, maintain_database
from retrieval_core.db.stores import ROW_COLUMNS, Store, embedding_expression, find_store, store_from_row
from retrieval_core.filters.predicate import TRUE, Predicate
from retrieval_core.filters.sql import metadata_predicate

K = 5
WORDS = ["river", "stone", "bridge", "weir", "quay", "lock", "ford", "mill", "canal", "harbour"]
# name: (dimension, storage, text search configuration)
STORES = {"docs-en": (8, "vector", "english"), "docs-simple": (4, "halfvec", "simple")}


def _old_store_ddl(store: Store) -> list[sql.Composable]:
    """What creating a store added to the schema up to version 11."""
    sid = sql.Literal(store.id)
    return [
        sql.SQL("CREATE INDEX {} ON chunks USING hnsw (({}) {}) WHERE store_id = {}").format(
            sql.Identifier(f"chunks_embedding_hnsw_store_{store.id}"),
            embedding_expression(store),
            sql.SQL(f"{store.storage}_cosine_ops"),
            sid,
        ),
        sql.SQL("CREATE INDEX {} ON chunks USING gin (metadata jsonb_path_ops) WHERE store_id = {}").format(
            sql.Identifier(f"chunks_metadata_gin_store_{store.id}"), sid
        ),
        sql.SQL("CREATE INDEX {} ON keyword_chunks USING gin (tsv) WHERE store_id = {}").format(
            sql.Identifier(f"keyword_chunks_tsv_gin_store_{store.id}"), sid
        ),
        sql.SQL("SELECT create_keyword_search({})").format(sid),
    ]


def _documents(dimension: int, seed: int) -> list[DocumentRow]:
    rng = np.random.default_rng(seed)
    documents = []
    for d in range(40):
        chunks = []
        for c in range(3):
            text = " ".join(rng.choice(WORDS, size=6)) + (" kingfisher" if d % 13 == c == 0 else "")
            vector = rng.normal(size=dimension)
            metadata = {"tenant": "one" if d % 10 == 0 else "rest", "part": c}
            chunks.append(ChunkRow(f"d{d:02d}", c, text, metadata, vector.tolist()))
        documents.append(DocumentRow(f"d{d:02d}", f"title {d}", {}, "-", chunks))
    return documents


def _store_11(conn: Any, name: str) -> Store:
    """A store's row as schema 11 holds it: its own HNSW index, no shared indexes, no chunking of its own
    (migration 19)."""
    columns = ROW_COLUMNS.removesuffix(", chunking")
    row = conn.execute(f"SELECT {columns} FROM stores WHERE name = %s", (name,)).fetchone()
    return store_from_row((*row, None, True, False))


def _build_schema_11(dsn: str) -> None:
    run_migrations(dsn, migrations=MIGRATIONS[:11])
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        for seed, (name, (dimension, storage, text_search)) in enumerate(STORES.items()):
            conn.execute(
                "INSERT INTO stores (name, display_name, embedding_model, dimension, storage, text_search)"
                " VALUES (%s, %s, 'm', %s, %s, %s::regconfig)",
                (name, name, dimension, storage, text_search),
            )
            store = _store_11(conn, name)
            for statement in _old_store_ddl(store):
                conn.execute(statement)
            replace_documents(conn, store, _documents(dimension, seed))
        conn.execute("CREATE SCHEMA team")
        conn.execute(
            "CREATE TABLE team.items (item_id text PRIMARY KEY, body text, vec vector(8), meta jsonb)"
        )
        conn.execute(
            "INSERT INTO team.items SELECT 'item-' || i, 'row ' || i, array_fill(i::real, ARRAY[8])::vector,"
            " '{}' FROM generate_series(1, 20) AS i"
        )
        conn.execute("CREATE INDEX items_vec ON team.items USING hnsw (vec vector_cosine_ops)")
        columns = {"id": "item_id", "content": "body", "embedding": "vec", "metadata": "meta"}
        source = inspect_source(conn, source_request("team.items", columns), "m", 8)
        conn.execute(
            "INSERT INTO stores (name, display_name, embedding_model, dimension, storage, source)"
            " VALUES ('team-items', 'team-items', 'm', 8, %s, %s)",
            (source.vector_type, Jsonb(source.to_json())),
        )
        conn.execute("ANALYZE")


FILTERS: dict[str, Predicate] = {
    "none": TRUE,
    "tenant": metadata_predicate({"tenant": "one"}),
    "in": metadata_predicate("tenant IN ('one', 'none') AND part = 1"),
}


def _answers(dsn: str, schema_11: bool = False) -> dict[tuple[str, ...], Any]:
    """Every store's answers to the same searches: dense (exact and as planned), keyword and hybrid."""
    answers: dict[tuple[str, ...], Any] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        register_vector(conn)
        for name, (dimension, _, _) in STORES.items():
            store = _store_11(conn, name) if schema_11 else find_store(conn, name)
            assert store is not None
            query = np.random.default_rng(99).normal(size=dimension).tolist()
            for label, where in FILTERS.items():
                with conn.transaction():
                    search_sql.set_search_options(conn, IndexKnobs(100, "strict_order", 20_000))
                    exact = search_sql.nearest_chunks(conn, store, query, K, where, exact=True)
                    keyword = keyword_sql.keyword_chunks(conn, store, "river stone mill", K, where)
                    hybrid = search_sql.hybrid_chunks(conn, store, query, "weir quay", K, where)
                answers[(name, label, "exact")] = [(c.document_id, c.chunk_index) for c in exact]
                answers[(name, label, "keyword")] = [(d, i, round(s, 6)) for d, i, s in keyword]
                answers[(name, label, "hybrid")] = sorted(
                    (c.document_id, c.chunk_index, round(c.keyword_score or 0, 6)) for c in hybrid
                )
        answers[("counts",)] = conn.execute(
            "SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM keyword_chunks),"
            " (SELECT count(*) FROM (SELECT DISTINCT store_id, document_id, chunk_index FROM chunks) AS c),"
            " (SELECT array_agg(source::text ORDER BY name) FROM stores WHERE source IS NOT NULL),"
            " (SELECT array_agg(indexname::text ORDER BY indexname) FROM pg_indexes"
            "  WHERE schemaname = 'team')"
        ).fetchone()
    return answers


def _per_store_objects(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT relname FROM pg_class WHERE relname ~ '_store_[0-9]+$'"
            " UNION ALL SELECT proname FROM pg_proc"
            "  WHERE proname ~ '^keyword_hits_store_|^create_keyword_search$'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def _keyword_plan(dsn: str, where: Predicate) -> str:
    with psycopg.connect(dsn) as conn, conn.transaction(force_rollback=True):
        store = find_store(conn, "docs-en")
        assert store is not None
        search_sql.set_search_options(conn, IndexKnobs(40, "relaxed_order", 20_000))
        chunk_filters.allow_bitmap_scans(conn)
        # A store this small is cheaper to read by its primary key: with that way out (rolled back after),
        # the plan shows which GIN index the statement's conditions can use.
        conn.execute("ALTER TABLE keyword_chunks DROP CONSTRAINT keyword_chunks_pkey")
        query = keyword_sql.keyword_chunks_query(store, where)
        params = keyword_sql.keyword_params(store, "kingfisher", K, where)  # a rare word: 4 chunks
        return "\n".join(r[0] for r in conn.execute(b"EXPLAIN " + query.as_bytes(conn), params))


class _Interrupted(Exception):
    pass


def test_an_upgraded_database_answers_alike_before_during_and_after_the_index_change(
    private_postgres: Any,
) -> None:
    dsn = str(private_postgres.get_uri())
    _build_schema_11(dsn)
    before = _answers(dsn, schema_11=True)
    assert before[("docs-en", "tenant", "exact")] and before[("docs-simple", "none", "keyword")]
    old_objects = _per_store_objects(dsn)
    assert len(old_objects) == 2 * 4 + 1  # three indexes and a function a store, and the function making them

    assert run_migrations(dsn).applied == [12, 13, 14, 15, 16, 17, 18, 19]
    with psycopg.connect(dsn) as conn:
        store = find_store(conn, "docs-en")
    assert store is not None and not store.scoped_indexes and store.vector_index
    assert _answers(dsn) == before
    # Until the shared indexes are valid, searches read the store's own.
    plan = _keyword_plan(dsn, TRUE)
    assert f"keyword_chunks_tsv_gin_store_{store.id}" in plan, plan

    # A run cut off after its first step (a deploy's time-out, a crash): the next one goes on.
    def interrupt_second(action: str, seen: list[str] = []) -> None:  # noqa: B006 - one run's memory
        seen.append(action)
        if len(seen) == 2:
            raise _Interrupted(action)

    policy = IndexPolicy(min_chunks=1_000, most=32)  # every store here is small: searched exactly
    with pytest.raises(_Interrupted):
        maintain_database(dsn, policy, connect_timeout_s=5, progress=interrupt_second)
    assert _answers(dsn) == before
    run = maintain_database(dsn, policy, connect_timeout_s=5)
    assert run.failed == [] and not run.busy and run.left == []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ANALYZE")
    assert any(step.startswith("build shared index") for step in run.done)

    with psycopg.connect(dsn) as conn:
        store = find_store(conn, "docs-en")
    assert store is not None and store.scoped_indexes and not store.vector_index
    assert _answers(dsn) == before
    assert _per_store_objects(dsn) == []
    # Built by the maintenance, without pending lists that every store's searches would read.
    with psycopg.connect(dsn) as conn:
        options = conn.execute(
            "SELECT array_agg(DISTINCT array_to_string(reloptions, ',')) FROM pg_class"
            " WHERE relname IN ('keyword_chunks_scope_gin', 'chunks_metadata_scope_gin')"
        ).fetchone()
    assert options == (["fastupdate=off"],)
    assert "keyword_chunks_scope_gin" in _keyword_plan(dsn, FILTERS["tenant"])
    assert maintain_database(dsn, policy, connect_timeout_s=5).done == []
