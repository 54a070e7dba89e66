"""Retrieval quality on msmarco-5k (BEIR format). Run with `make eval`; writes docs/quality.md.

Every method ranks the same 5,000 passages for the same 50 TREC-DL queries through the service's own
search code (`RetrievalService.search_chunks` and `fusion.fuse`), 100 candidates deep:

- dense, exact: every passage scored in numpy, the reference the HNSW index is held to;
- dense (HNSW): the naive engine's vector search;
- keyword: PostgreSQL full-text search alone (websearch_to_tsquery, ts_rank_cd);
- hybrid RRF and hybrid weighted: both lists fused, as `useHybrid` does;
- MMR: the dense candidates re-ordered by maximal marginal relevance over their stored embeddings.

Metrics: nDCG@10 with gains 2^grade - 1 (the formulation the anchors in docs/quality.md were measured
with: exact dense search gives 0.704 with it, 0.798 with linear gains), and recall@100 with a passage
relevant when its grade is at least 1. Nothing is tuned per query. The weighted fusion
sweep uses the same queries it is reported on (there is no held-out split in this set); the README
default stays seed 004's 0.7 / 0.3.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from bench.common import EVAL_DIR, REPO, load_queries, machine
from bench.core import STORE, ingest

DEPTH = 100
WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9)
MMR_LAMBDA = 0.7
OUT = REPO / "docs" / "quality.md"

Ranking = list[str]


def load_qrels() -> dict[str, dict[str, int]]:
    """query id -> {document id: grade}; the file has no header."""
    qrels: dict[str, dict[str, int]] = {}
    for line in (EVAL_DIR / "qrels" / "test.tsv").read_text().splitlines():
        query_id, doc_id, grade = line.split("\t")
        qrels.setdefault(query_id, {})[doc_id] = int(grade)
    return qrels


def gain(grade: int) -> float:
    """Exponential gain: a grade-3 passage is worth 7 grade-1 ones."""
    return float(2**grade - 1)


def ndcg_at(ranking: Ranking, judged: dict[str, int], k: int = 10) -> float:
    """nDCG@k, gains 2^grade - 1, discount log2(rank + 1)."""
    dcg = sum(gain(judged.get(doc, 0)) / math.log2(i + 2) for i, doc in enumerate(ranking[:k]))
    ideal = sorted(judged.values(), reverse=True)[:k]
    best = sum(gain(g) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / best if best > 0 else 0.0


def recall_at(ranking: Ranking, judged: dict[str, int], k: int = DEPTH) -> float:
    """Share of the relevant (grade >= 1) documents found in the top k."""
    relevant = {doc for doc, grade in judged.items() if grade >= 1}
    return len(relevant & set(ranking[:k])) / len(relevant) if relevant else 0.0


def documents(keys: Sequence[tuple[str, int]]) -> Ranking:
    """Chunk keys to document ids, first occurrence kept (a document ranks by its best chunk)."""
    return list(dict.fromkeys(doc for doc, _ in keys))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--no-write", action="store_true", help="print the table, leave docs/quality.md alone"
    )
    args = parser.parse_args()

    import numpy as np

    from retrieval_core.fusion import fuse, ordered
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.ranking import ScoredChunk
    from retrieval_core.rerank.mmr import maximal_marginal_relevance
    from retrieval_core.runtime import get_service

    ingest(fresh=False)
    service = get_service()
    store = service.get_store(STORE)
    queries = load_queries()
    qrels = load_qrels()
    query_ids = [q for q in queries if q in qrels]
    vectors = dict(
        zip(query_ids, service.embedder.embed([queries[q] for q in query_ids], "query"), strict=True)
    )

    with service.database.connection() as conn:
        rows = conn.execute(
            "SELECT document_id, chunk_index, embedding FROM chunks WHERE store_id = %s", (store.id,)
        ).fetchall()
    keys = [(r[0], r[1]) for r in rows]
    matrix = np.array([r[2].to_list() for r in rows], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)

    def exact(query_id: str) -> Ranking:
        query = np.asarray(vectors[query_id], dtype=np.float32)
        scores = matrix @ (query / np.linalg.norm(query))
        return documents([keys[i] for i in np.argsort(-scores, kind="stable")[:DEPTH]])

    def dense(candidates: list[ScoredChunk]) -> Ranking:
        return documents([c.key for c in candidates if c.vector_hit])

    def keyword(candidates: list[ScoredChunk]) -> Ranking:
        hits = {c.key: c.keyword_score for c in candidates if c.keyword_score is not None}
        return documents(ordered(hits))

    def fused(mode: str, vector_weight: float = 0.5) -> Callable[[list[ScoredChunk]], Ranking]:
        def rank(candidates: list[ScoredChunk]) -> Ranking:
            return documents(ordered(fuse(candidates, mode, vector_weight, 1 - vector_weight)))  # type: ignore[arg-type]

        return rank

    def mmr(query_id: str, candidates: list[ScoredChunk]) -> Ranking:
        nearest = [c for c in candidates if c.vector_hit]
        order = maximal_marginal_relevance(
            vectors[query_id], [c.embedding for c in nearest if c.embedding is not None], DEPTH, MMR_LAMBDA
        )
        return documents([nearest[i].key for i in order])

    methods: dict[str, Callable[[list[ScoredChunk]], Ranking]] = {
        "dense (HNSW, naive engine)": dense,
        "keyword only (PostgreSQL full text)": keyword,
        "hybrid RRF (k=60)": fused("rrf"),
        **{f"hybrid weighted {w:.1f} / {1 - w:.1f}": fused("weighted", w) for w in WEIGHTS},
    }
    exact_name, mmr_name = "dense, exact (reference)", f"MMR (lambda {MMR_LAMBDA})"
    rankings: dict[str, dict[str, Ranking]] = {exact_name: {}, mmr_name: {}, **{name: {} for name in methods}}
    for query_id in tqdm(query_ids, desc="eval queries", unit="query"):
        _, candidates = service.search_chunks(
            STORE,
            vectors[query_id],
            DEPTH,
            grant=OPEN_GRANT,
            query_text=queries[query_id],
            with_embeddings=True,
        )
        rankings[exact_name][query_id] = exact(query_id)
        rankings[mmr_name][query_id] = mmr(query_id, candidates)
        for name, method in methods.items():
            rankings[name][query_id] = method(candidates)

    lines = [
        "# Retrieval quality",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine()}.",
        "Command: `make eval` (`python -m bench.eval`). Data: `../shared/eval/msmarco-5k` "
        f"({len(rows):,} chunks, {len(query_ids)} judged queries), embedded with the local all-MiniLM-L6-v2, "
        f"HNSW ef_search {service.ef_search}.",
        "",
        "| method | nDCG@10 | recall@100 |",
        "|---|---|---|",
    ]
    for name, per_query in rankings.items():
        ndcg = sum(ndcg_at(per_query[q], qrels[q]) for q in query_ids) / len(query_ids)
        recall = sum(recall_at(per_query[q], qrels[q]) for q in query_ids) / len(query_ids)
        lines.append(f"| {name} | {ndcg:.3f} | {recall:.3f} |")
    table = "\n".join(lines)
    print(table)
    if not args.no_write:
        notes = OUT.read_text().split("<!-- notes -->", 1)[1] if OUT.exists() else "\n"
        OUT.write_text(f"{table}\n\n<!-- notes -->{notes}")
        print(f"\nwritten to {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    os.chdir(REPO)
    Path("docs").mkdir(exist_ok=True)
    main()
