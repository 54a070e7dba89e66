"""Keyword scoring on the three dev sets: nDCG@10 and p50 latency, keyword against dense.

Needs each set ingested into a store of its name (`retrieval ingest ../shared/eval/<set>/corpus.jsonl
--store <set>`; `--ingest` does it for missing ones). For every judged query it ranks documents (a
document ranks by its best chunk, 100 chunks deep) with:

- BM25: the service's keyword search (`keyword_sql.keyword_chunks`: stored term weights, IDF per store);
- ts_rank_cd: the ranking before BM25 (the same SQL the service runs on a store not yet backfilled);
- BM25 in SQL from the tsvector: the alternative without stored weights (`ALTERNATIVE_SQL`), with the
  store's current average length.

and times, in one interleaved run, the keyword-only top-10 against the dense top-10 (HNSW, as the
naive engine searches), both without embedding the query. nDCG@10 uses gains 2^grade - 1, as
bench/eval.py does.

`--borrow-vectors scifact,nfcorpus` reads those sets from stores `<set>-borrowed` (built if missing:
the set's text chunked as ingest chunks it, with real all-MiniLM-L6-v2 vectors of msmarco-5k's chunks
plus noise), for when embedding the sets takes longer than there is time: the keyword side is the
real one, the dense side is timed on realistic vectors but its ranking means nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bench.common import REPO, machine, median, timed_ms

EVAL = REPO.parent / "shared" / "eval"
SETS = ("msmarco-5k", "scifact", "nfcorpus")
DEPTH = 100

# BM25 computed at query time from the tsvector and the df table, no stored weights: what the stored
# sparse vectors are compared with. Same formula and constants as keyword_weights in migration 7.
ALTERNATIVE_SQL = """
WITH q AS MATERIALIZED (
    SELECT regexp_replace(websearch_to_tsquery(%(cfg)s::regconfig, %(text)s)::text, ' & (?!!)', ' | ', 'g')
               ::tsquery AS q,
           tsvector_to_array(to_tsvector(%(cfg)s::regconfig, %(text)s)) AS lexemes),
idf AS MATERIALIZED (
    SELECT t.lexeme, ln(1 + (s.keyword_chunk_count - t.df + 0.5) / (t.df + 0.5)) AS idf,
           s.keyword_length_sum::float8 / s.keyword_chunk_count AS average_length
    FROM keyword_terms t JOIN stores s ON s.id = t.store_id, q
    WHERE t.store_id = %(store_id)s AND t.df > 0 AND t.lexeme = ANY(q.lexemes))
SELECT k.document_id, k.chunk_index,
       sum(idf.idf * cardinality(u.positions) * 2.2
           / (cardinality(u.positions) + 1.2 * (0.25 + 0.75 * k.length / idf.average_length))) AS score
FROM keyword_chunks k, q, LATERAL unnest(k.tsv) AS u JOIN idf ON idf.lexeme = u.lexeme
WHERE k.store_id = %(store_id)s AND k.tsv @@ q.q
GROUP BY 1, 2 ORDER BY score DESC, 1, 2 LIMIT %(limit)s
"""


def build_borrowed(service: Any, name: str, donor: str) -> None:
    """Store `<name>-borrowed`: the set's documents chunked as ingest chunks them (title, blank line,
    chunk), each chunk given the embedding of a chunk of store `donor` (cyclically, plus Gaussian noise
    of sd 0.02, unit length). Real text for the keyword side; real model vectors, though not this
    text's, for timing the dense side when embedding the set would take too long."""
    import random

    import numpy as np

    from retrieval_core.db.documents import ChunkRow, DocumentRow, replace_documents
    from retrieval_core.db.stores import create_store, find_store
    from retrieval_core.documents.chunking import chunk_text
    from retrieval_core.settings import get_settings

    settings = get_settings()
    with service.database.connection() as conn:
        source = find_store(conn, donor)
        assert source is not None, f"store {donor} is missing"
        vectors = [
            r[0].to_list()
            for r in conn.execute(
                "SELECT embedding FROM chunks WHERE store_id = %s ORDER BY document_id, chunk_index",
                (source.id,),
            )
        ]
        store = create_store(
            conn, f"{name}-borrowed", f"{name}-borrowed", source.embedding_model, source.dimension
        )
        rng = np.random.default_rng(18)
        random.Random(18).shuffle(vectors)
        documents: list[DocumentRow] = []
        used = 0
        with (EVAL / name / "corpus.jsonl").open() as lines:
            for record in map(json.loads, lines):
                title = record.get("title") or ""
                chunks = []
                for index, chunk in enumerate(
                    chunk_text(record["text"], settings.chunk_size, settings.chunk_overlap)
                ):
                    vector = np.asarray(vectors[used % len(vectors)]) + rng.normal(0, 0.02, source.dimension)
                    used += 1
                    text = f"{title}\n\n{chunk}" if title else chunk
                    chunks.append(
                        ChunkRow(record["_id"], index, text, {}, (vector / np.linalg.norm(vector)).tolist())
                    )
                documents.append(DocumentRow(record["_id"], title, {}, "-", chunks))
        for start in range(0, len(documents), 500):
            replace_documents(conn, store, documents[start : start + 500])


def load(name: str) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Queries with judgments, and the judgments (query id -> document id -> grade)."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (EVAL / name / "qrels" / "test.tsv").read_text().splitlines():
        query_id, doc_id, grade = line.split("\t")
        if query_id != "query-id":
            qrels.setdefault(query_id, {})[doc_id] = int(grade)
    with (EVAL / name / "queries.jsonl").open() as lines:
        queries = {str(q["_id"]): q["text"] for q in map(json.loads, lines)}
    return {q: t for q, t in queries.items() if q in qrels}, qrels


def ndcg_at_10(ranking: list[str], judged: dict[str, int]) -> float:
    """nDCG@10, gains 2^grade - 1."""
    dcg = sum((2 ** judged.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranking[:10]))
    ideal = sorted(judged.values(), reverse=True)[:10]
    best = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best > 0 else 0.0


def documents(keys: list[tuple[str, int]]) -> list[str]:
    """Document ids in order of their best chunk."""
    return list(dict.fromkeys(doc for doc, _ in keys))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--ingest", action="store_true", help="ingest the sets that have no store yet")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes over the queries")
    parser.add_argument(
        "--borrow-vectors",
        default="",
        help="sets (comma-separated) read from store <set>-borrowed, built if missing with vectors of "
        "store msmarco-5k (see build_borrowed)",
    )
    args = parser.parse_args()

    from psycopg import sql

    from retrieval_core.container import get_service
    from retrieval_core.db import chunk_filters, keyword_sql, search_sql
    from retrieval_core.exceptions import StoreNotFoundError
    from retrieval_core.filters.predicate import TRUE

    service = get_service()
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}; load: {os.getloadavg()}")
    print()
    print(
        "| set | chunks | queries | BM25 nDCG@10 | ts_rank_cd | BM25 from tsvector | keyword p50 ms "
        "| dense p50 ms | BM25 from tsvector p50 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    borrowed = set(args.borrow_vectors.split(",")) - {""}

    def store_for(name: str) -> Any:
        wanted = f"{name}-borrowed" if name in borrowed else name
        try:
            return service.get_store(wanted)
        except StoreNotFoundError:
            if name in borrowed:
                build_borrowed(service, name, "msmarco-5k")
            elif args.ingest:
                corpus = str(EVAL / name / "corpus.jsonl")
                command = [sys.executable, "-m", "retrieval_core.cli.main", "ingest", corpus, "--store", name]
                subprocess.run(command, check=True)
            else:
                raise
            return service.get_store(wanted)

    stores = {name: store_for(name) for name in args.sets.split(",")}
    # Fresh stores: the planner needs their statistics, and the GIN indexes' pending lists are merged,
    # as autovacuum would do a while after a bulk load.
    with service.database.connection() as conn:
        for table in ("chunks", "keyword_chunks", "keyword_terms"):
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    for name, store in stores.items():
        queries, qrels = load(name)
        legacy = replace(store, keyword_ready=False)
        dense_too = store.embedding_model == service.embedder.model
        texts = list(queries.values()) if dense_too else []
        vectors = dict(zip(queries, service.embedder.embed(texts, "query"), strict=False))

        def bm25(text: str, limit: int, s: Any = store) -> list[tuple[str, int, float]]:
            with service.database.connection() as conn, conn.transaction():
                search_sql.set_search_options(conn, service.index_knobs)
                return keyword_sql.keyword_chunks(conn, s, text, limit, TRUE)

        def alternative(text: str, limit: int, store: Any = store) -> list[tuple[str, int]]:
            with service.database.connection() as conn, conn.transaction():
                search_sql.set_search_options(conn, service.index_knobs)
                chunk_filters.allow_bitmap_scans(conn)
                params = {"cfg": store.text_search, "text": text, "store_id": store.id, "limit": limit}
                return [(r[0], r[1]) for r in conn.execute(ALTERNATIVE_SQL, params).fetchall()]

        def dense(vector: list[float], limit: int, store: Any = store) -> list[tuple[str, int]]:
            with service.database.connection() as conn, conn.transaction():
                search_sql.set_search_options(conn, service.index_knobs)
                return [c.key for c in search_sql.nearest_chunks(conn, store, vector, limit, TRUE)]

        scores: dict[str, list[float]] = {"bm25": [], "legacy": [], "alternative": []}
        for query_id, text in queries.items():
            judged = qrels[query_id]
            scores["bm25"].append(ndcg_at_10(documents([(d, c) for d, c, _ in bm25(text, DEPTH)]), judged))
            legacy_keys = [(d, c) for d, c, _ in bm25(text, DEPTH, legacy)]
            scores["legacy"].append(ndcg_at_10(documents(legacy_keys), judged))
            scores["alternative"].append(ndcg_at_10(documents(alternative(text, DEPTH)), judged))
        timings: dict[str, list[float]] = {"bm25": [], "dense": [], "alternative": []}
        for repeat in range(args.repeat):
            for index, (query_id, text) in enumerate(queries.items()):
                calls = [
                    ("bm25", lambda t=text: bm25(t, 10)),
                    ("alternative", lambda t=text: alternative(t, 10)),
                ]
                if dense_too:
                    calls.append(("dense", lambda v=vectors[query_id]: dense(v, 10)))
                # Rotate the order: the second run of a query finds warmer pages.
                shift = (repeat + index) % len(calls)
                for label, call in calls[shift:] + calls[:shift]:
                    timings[label] += timed_ms(call, 1)
        mean = {k: sum(v) / len(v) for k, v in scores.items()}
        p50 = {k: f"{median(v):.2f}" if v else "–" for k, v in timings.items()}
        print(
            f"| {name} | {store.chunk_count:,} | {len(queries)} | {mean['bm25']:.3f} | {mean['legacy']:.3f} "
            f"| {mean['alternative']:.3f} | {p50['bm25']} | {p50['dense']} | {p50['alternative']} |"
        )


if __name__ == "__main__":
    os.chdir(REPO)
    main()
