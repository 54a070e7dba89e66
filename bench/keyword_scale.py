"""Keyword search at 200,000 chunks: write cost of the keyword index, backfill rate, and
keyword-only p50 against dense p50 in one interleaved run, then hybrid against dense p50 at the API's
depth (`RetrievalService.retrieve`, as `bench.hybrid_latency` times the 5k sets).

The rows are the dev sets' chunks, each with its document's title as every writer stores it (their
stores must exist: `make eval-all` loads them) repeated with variation until `--rows`: repeat r drops
each word of a chunk with probability 0.15
(seeded) and adds Gaussian noise (sd 0.02) to its embedding, so document frequencies grow as they
would in a larger corpus of the same kind instead of every lexeme being copied exactly. The store's
HNSW index is built once after loading, as a bulk load would. The backfill is timed by emptying the
store's keyword rows and indexing them again with `db.keywords.backfill_keywords`, as migration 7's
backfill would. Queries: the judged queries of the three sets, embedded by the local model.

Its subject is db/'s `replace_documents` itself (the cost of the keyword index it keeps), so it writes
the chunks with that function directly rather than through tests/writing.py.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import REPO, machine, median, percentile, timed_ms
from bench.hybrid_latency import time_store
from bench.keyword import SETS, load

STORE = "keyword-scale"
BATCH = 2_000


def build(service: Any, rows: int, sources: list[str]) -> tuple[float, float]:
    """Load the store; seconds spent writing chunks (with the keyword triggers) and building HNSW."""
    import numpy as np

    from retrieval_core.db.documents import ChunkRow, DocumentRow, replace_documents
    from retrieval_core.db.stores import (
        create_index_statement,
        create_store,
        drop_store,
        find_store,
    )

    with service.database.connection() as conn:
        source_rows: list[tuple[str, int, str, Any, str]] = []
        for name in sources:
            store = find_store(conn, name)
            assert store is not None, f"store {name} is missing: run make eval-all"
            source_rows += conn.execute(
                "SELECT c.document_id, c.chunk_index, c.content, c.embedding, d.title FROM chunks c"
                " JOIN documents d ON d.store_id = c.store_id AND d.id = c.document_id WHERE c.store_id = %s",
                (store.id,),
            ).fetchall()
        existing = find_store(conn, STORE)
        if existing is not None:
            drop_store(conn, existing)
        dimension = len(source_rows[0][3].to_list())
        store = create_store(conn, STORE, STORE, service.embedder.model, dimension)
        rng = np.random.default_rng(18)
        write_s = 0.0
        written = 0
        repeat = 0
        while written < rows:
            words_rng = random.Random(repeat)
            documents: dict[str, list[ChunkRow]] = {}
            titles: dict[str, str] = {}
            for document_id, chunk_index, content, embedding, title in source_rows:
                if written >= rows:
                    break
                text = content
                if repeat:
                    text = " ".join(w for w in content.split() if words_rng.random() >= 0.15) or content
                vector = np.asarray(embedding.to_list()) + rng.normal(0, 0.02 if repeat else 0, dimension)
                doc = f"{document_id}~{repeat}"
                documents.setdefault(doc, []).append(ChunkRow(doc, chunk_index, text, {}, vector.tolist()))
                titles[doc] = title
                written += 1
            batch: list[DocumentRow] = []
            for doc, chunks in documents.items():
                batch.append(DocumentRow(doc, titles[doc], {}, "-", chunks))
                if sum(len(d.chunks) for d in batch) >= BATCH:
                    started = time.perf_counter()
                    replace_documents(conn, store, batch)
                    write_s += time.perf_counter() - started
                    batch = []
            if batch:
                started = time.perf_counter()
                replace_documents(conn, store, batch)
                write_s += time.perf_counter() - started
            repeat += 1
            print(f"  {written:,} chunks written ({write_s:.0f} s)", flush=True)
        started = time.perf_counter()
        # HNSW over 200,000 rows outlasts the service's statement timeout (144 s on 2 shared cores).
        conn.execute("SET statement_timeout = 0")
        conn.execute(create_index_statement(store))
        conn.execute("RESET statement_timeout")
        index_s = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE chunks")
        conn.execute("VACUUM ANALYZE keyword_chunks")
    return write_s, index_s


def time_backfill(service: Any) -> tuple[int, float]:
    """Empty the store's keyword index (as if written before migration 7), then backfill it."""
    from retrieval_core.db.keywords import backfill_keywords
    from retrieval_core.db.stores import find_store

    with service.database.connection() as conn:
        store = find_store(conn, STORE)
        assert store is not None
        with conn.transaction():
            conn.execute("DELETE FROM keyword_chunks WHERE store_id = %s", (store.id,))
            conn.execute("DELETE FROM keyword_terms WHERE store_id = %s", (store.id,))
            conn.execute(
                "UPDATE stores SET keyword_chunk_count = 0, keyword_length_sum = 0, keyword_ready = false"
                " WHERE id = %s",
                (store.id,),
            )
        started = time.perf_counter()
        done = backfill_keywords(conn)
        took = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE keyword_chunks")
    return done.chunks, took


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--reuse", action="store_true", help="keep the store if it exists")
    parser.add_argument("--skip-backfill", action="store_true")
    parser.add_argument("--queries", type=int, default=200, help="queries timed (drawn from all sets)")
    parser.add_argument(
        "--sources",
        default=",".join(f"eval-{name}" for name in SETS),
        help="stores whose chunks are repeated",
    )
    parser.add_argument("--top-k", type=int, default=20, help="similarityTopK of the hybrid lines")
    args = parser.parse_args()

    from retrieval_core.container import get_service
    from retrieval_core.db import keyword_sql, search_sql
    from retrieval_core.exceptions import StoreNotFoundError
    from retrieval_core.filters.predicate import TRUE

    service = get_service()
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}; load: {os.getloadavg()}")
    try:
        store = service.get_store(STORE)
        missing = not args.reuse or store.chunk_count < args.rows
    except StoreNotFoundError:
        missing = True
    if missing:
        write_s, index_s = build(service, args.rows, args.sources.split(","))
        print(f"write (COPY with keyword triggers): {write_s:.1f} s; HNSW build: {index_s:.1f} s")
    if not args.skip_backfill:
        chunks, took = time_backfill(service)
        print(f"backfill: {chunks:,} chunks in {took:.1f} s ({chunks / took:,.0f} chunks/s)")
    store = service.get_store(STORE)

    texts = [text for name in SETS for text in load(name)[0].values()]
    texts = random.Random(18).sample(texts, min(args.queries, len(texts)))
    vectors = service.embedder.embed(texts, "query")

    def keyword(text: str) -> None:
        with service.database.connection() as conn, conn.transaction():
            search_sql.set_search_options(conn, service.index_knobs)
            keyword_sql.keyword_chunks(conn, store, text, 10, TRUE)

    def dense(vector: list[float]) -> None:
        with service.database.connection() as conn, conn.transaction():
            search_sql.set_search_options(conn, service.index_knobs)
            search_sql.nearest_chunks(conn, store, vector, 10, TRUE)

    for text, vector in zip(texts[:20], vectors[:20], strict=True):  # warm the caches of both
        keyword(text)
        dense(vector)
    samples: dict[str, list[float]] = {"keyword": [], "dense": []}
    for index, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        pair = [("keyword", lambda t=text: keyword(t)), ("dense", lambda v=vector: dense(v))]
        for label, call in pair if index % 2 == 0 else reversed(pair):
            samples[label] += timed_ms(call, 1)
    print(f"store: {store.chunk_count:,} chunks; {len(texts)} queries, top 10, without embedding")
    for label, values in samples.items():
        print(f"{label}: p50 {median(values):.2f} ms, p95 {percentile(values, 95):.2f} ms")

    # Hybrid at the API's depth, as bench.hybrid_latency measures it on the 5k sets.
    results = time_store(service, STORE, texts, vectors, args.top_k, passes=3)
    print(
        f"RetrievalService.retrieve, similarityTopK {args.top_k}, the same queries, methods interleaved, "
        "median of 2 passes after a warm-up:"
    )
    for method, p50 in results.items():
        print(f"{method}: p50 {p50:.2f} ms ({p50 / results['dense']:.2f}x dense)")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
