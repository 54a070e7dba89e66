"""Run retrieval methods over judged queries against a store and tabulate quality and latency.

A method is a retrieve request's options run through `RetrievalService.retrieve` itself, so the table
measures whatever the service does (its keyword scorer, its fusion) without change here. Every request
asks for `depth` candidates and results through retrieve's internal `depth` (the HTTP API caps topK at
50), grade 0, and no cache. Scores are at document level: a document ranks by its best chunk.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from retrieval_core.evaluation.ranking_metrics import (
    Difference,
    documents_of,
    ndcg_at,
    paired_bootstrap,
    percentile,
    recall_at,
)
from retrieval_core.grants import OPEN_GRANT, Grant

if TYPE_CHECKING:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.embeddings.base import Embedder

DEPTH = 100
NDCG_K = 10
RESAMPLES = 2000
SEED = 0
BASELINE = "dense (HNSW)"


@dataclass(frozen=True, slots=True)
class Query:
    """A judged query with its embedding."""

    id: str
    text: str
    vector: Sequence[float]


Ranker = Callable[[Query], list[str]]


@dataclass(frozen=True, slots=True)
class Method:
    """A named way to rank documents for a query; `how` says what runs, for the table."""

    name: str
    how: str
    rank: Ranker


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """A retrieve request's options (camelCase, as over HTTP)."""

    name: str
    options: Mapping[str, Any]


WEIGHTS = (0.5, 0.6, 0.7, 0.8, 0.9)
MMR_LAMBDA = 0.7
HYBRID: dict[str, Any] = {"engineName": "naive", "useHybrid": True}
DEFAULT_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec(BASELINE, {"engineName": "naive"}),
    MethodSpec("keyword only", {"engineName": "naive", "searchMode": "keyword"}),
    MethodSpec("hybrid RRF (k=60)", {**HYBRID, "fusion": "rrf"}),
    *(
        MethodSpec(
            f"hybrid weighted{label} {w:.1f} / {1 - w:.1f}",
            {
                **HYBRID,
                "fusion": "weighted",
                "normalization": normalization,
                "vectorWeight": w,
                "keywordWeight": round(1 - w, 1),
            },
        )
        for normalization, label in (("minmax", ""), ("max", ", max-scaled"))
        for w in WEIGHTS
    ),
    MethodSpec(
        f"MMR (lambda {MMR_LAMBDA})",
        {"engineName": "default", "rerank": {"strategy": "mmr"}, "mmrLambda": MMR_LAMBDA},
    ),
)


def service_method(
    service: RetrievalService, store: str, spec: MethodSpec, depth: int = DEPTH, grant: Grant = OPEN_GRANT
) -> Method:
    """`spec` as a method: one `retrieve` per query, with the query's precomputed vector, as `grant`.

    Options a retrieve request refuses are an InvalidRequestError now, before any query runs.
    """
    from pydantic import ValidationError

    from retrieval_core.schemas.common import validation_error
    from retrieval_core.schemas.retrieve import RetrieveRequest, no_threshold

    grade = no_threshold(spec.options)
    try:
        RetrieveRequest.model_validate({**spec.options, "query": "check", **grade})
    except ValidationError as exc:
        raise validation_error(exc) from None

    def rank(query: Query) -> list[str]:
        request = RetrieveRequest.model_validate(
            {**spec.options, "query": query.text, **grade, "store": store, "cacheTTLms": 0}
        )
        response, _ = service.retrieve(request, lambda _: query.vector, grant=grant, depth=depth)
        results = response.results
        # A naive hybrid answer is the union of both lists (up to twice `depth`): every method is
        # scored on its first `depth` chunks.
        return documents_of(str(r.metadata["documentId"]) for r in results[:depth])

    return Method(spec.name, json.dumps(dict(spec.options), separators=(", ", ": ")), rank)


def exact_dense_method(service: RetrievalService, store: str, depth: int = DEPTH) -> Method:
    """Every chunk of `store` scored against the query in numpy: the reference the index is held to.

    Loads all the store's embeddings into memory (4 bytes a dimension a chunk).
    """
    import numpy as np
    from psycopg import sql

    found = service.get_store(store)
    query = sql.SQL(
        "SELECT document_id, embedding::vector({dim}) FROM chunks WHERE store_id = %s"
        " ORDER BY document_id, chunk_index"
    ).format(dim=sql.Literal(found.dimension))
    with service.database.connection() as conn:
        rows = conn.execute(query, (found.id,)).fetchall()
    documents = [str(r[0]) for r in rows]
    matrix = np.array([np.asarray(r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1]) for r in rows])
    matrix = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)).astype(np.float32)

    def rank(q: Query) -> list[str]:
        vector = np.asarray(q.vector, dtype=np.float32)
        scores = matrix @ (vector / np.linalg.norm(vector))
        top = np.argpartition(-scores, min(depth, len(scores) - 1))[:depth]
        best = top[np.argsort(-scores[top], kind="stable")]
        return documents_of(documents[i] for i in best)

    return Method("dense, exact (numpy)", "every chunk scored in numpy", rank)


@dataclass(slots=True)
class MethodResult:
    """Per-query scores and latencies of one method, in the order of the queries."""

    method: Method
    ndcg: list[float] = field(default_factory=list)
    recall: list[float] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)

    @property
    def mean_ndcg(self) -> float:
        """Mean nDCG@10."""
        return sum(self.ndcg) / len(self.ndcg)

    @property
    def mean_recall(self) -> float:
        """Mean recall@DEPTH."""
        return sum(self.recall) / len(self.recall)

    @property
    def p50_ms(self) -> float:
        """Median latency of one ranking, in milliseconds."""
        return percentile(self.latency_ms, 0.5)


def judged_queries(
    queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]
) -> tuple[list[str], int]:
    """Ids of the queries with at least one relevant (grade >= 1) judgment, in query order, and how many
    judged query ids have no query text (left out)."""
    relevant = {q for q, judged in qrels.items() if any(grade >= 1 for grade in judged.values())}
    return [q for q in queries if q in relevant], len(relevant - set(queries))


def embed_queries(
    embedder: Embedder, queries: Mapping[str, str], ids: Sequence[str], progress: bool = True
) -> list[Query]:
    """The queries `ids` with their embeddings, in batches of 64."""
    from tqdm import tqdm

    result: list[Query] = []
    with tqdm(total=len(ids), desc="embed queries", unit=" queries", disable=not progress) as bar:
        for start in range(0, len(ids), 64):
            batch = ids[start : start + 64]
            vectors = embedder.embed([queries[q] for q in batch], "query")
            result += [Query(q, queries[q], v) for q, v in zip(batch, vectors, strict=True)]
            bar.update(len(batch))
    return result


def evaluate(
    methods: Sequence[Method],
    queries: Sequence[Query],
    qrels: Mapping[str, Mapping[str, int]],
    depth: int = DEPTH,
    progress: bool = True,
) -> list[MethodResult]:
    """Rank every query with every method (interleaved, so that all see the same machine state)."""
    from tqdm import tqdm

    results = [MethodResult(m) for m in methods]
    for query in tqdm(queries, desc="evaluate", unit=" queries", disable=not progress):
        judged = qrels[query.id]
        for result in results:
            start = time.perf_counter()
            ranking = result.method.rank(query)
            result.latency_ms.append((time.perf_counter() - start) * 1000)
            result.ndcg.append(ndcg_at(ranking, judged, NDCG_K))
            result.recall.append(recall_at(ranking, judged, depth))
    return results


def differences(results: Sequence[MethodResult], baseline: str = BASELINE) -> dict[str, Difference]:
    """Each method's paired nDCG@10 difference against `baseline`, with its bootstrap 95% interval."""
    base = next(r for r in results if r.method.name == baseline)
    return {
        r.method.name: paired_bootstrap(r.ndcg, base.ndcg, RESAMPLES, SEED) for r in results if r is not base
    }


def table(results: Sequence[MethodResult], depth: int = DEPTH, baseline: str = BASELINE) -> str:
    """A Markdown table: quality, latency and the difference against `baseline` of every method."""
    diffs = differences(results, baseline) if any(r.method.name == baseline for r in results) else {}
    lines = [
        f"| method | nDCG@{NDCG_K} | recall@{depth} | p50 ms | ΔnDCG@{NDCG_K} vs {baseline} [95% CI] "
        "| what runs |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        diff = diffs.get(r.method.name)
        delta = "—" if diff is None else f"{diff.mean:+.3f} [{diff.low:+.3f}, {diff.high:+.3f}]"
        if diff is not None and diff.significant:
            delta = f"**{delta}**"
        lines.append(
            f"| {r.method.name} | {r.mean_ndcg:.3f} | {r.mean_recall:.3f} | {r.p50_ms:.1f} | {delta} "
            f"| `{r.method.how}` |"
        )
    return "\n".join(lines)


def store_counts(service: RetrievalService, store: str) -> tuple[int, int]:
    """(documents, chunks) of `store`."""
    from retrieval_core.db import stores

    found = service.get_store(store)
    with service.database.connection() as conn:
        return stores.store_counts(conn, [found.id]).get(found.id, (0, 0))


@dataclass(frozen=True, slots=True)
class Report:
    """One evaluation of a store: what was searched and every method's result."""

    store: str
    documents: int
    chunks: int
    queries: int
    unjudged: int
    missing_text: int
    ef_search: int
    results: list[MethodResult]
    depth: int = DEPTH

    def header(self) -> str:
        """What was measured, in one paragraph."""
        left_out = f"; {self.unjudged} queries without a relevant judgment left out" if self.unjudged else ""
        missing = f"; {self.missing_text} judged query ids have no text" if self.missing_text else ""
        return (
            f"Store `{self.store}`: {self.documents:,} documents in {self.chunks:,} chunks "
            f"({self.chunks / max(self.documents, 1):.2f} per document); {self.queries} judged queries"
            f"{left_out}{missing}. Each method ranks {self.depth} chunks deep (HNSW ef_search "
            f"{self.ef_search}); a document ranks by its best chunk, so recall@{self.depth} counts the "
            f"documents of those chunks. Latency: one ranking, query embedding excluded. Bold: the "
            f"{RESAMPLES:,}-resample paired bootstrap interval (seed {SEED}) excludes 0."
        )

    def markdown(self) -> str:
        """The header and the table."""
        return f"{self.header()}\n\n{table(self.results, self.depth)}"


def evaluate_store(
    service: RetrievalService,
    store: str,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    extra: Sequence[Method] = (),
    specs: Sequence[MethodSpec] = DEFAULT_METHODS,
    exact: bool = True,
    embedder: Embedder | None = None,
    progress: bool = True,
) -> Report:
    """Every method (the exact reference, `specs` as requests, then `extra`) on the judged queries.

    `embedder` embeds the queries (default: the service's; the bench passes one that caches vectors).
    """
    ids, missing_text = judged_queries(queries, qrels)
    if not ids:
        from retrieval_core.exceptions import InvalidRequestError

        raise InvalidRequestError("no query has both a text and a relevant (grade >= 1) judgment")
    documents, chunks = store_counts(service, store)
    methods = [exact_dense_method(service, store)] if exact else []
    methods += [service_method(service, store, spec) for spec in specs]
    methods += extra
    embedded = embed_queries(embedder or service.embedder, queries, ids, progress)
    results = evaluate(methods, embedded, qrels, DEPTH, progress)
    return Report(
        store=store,
        documents=documents,
        chunks=chunks,
        queries=len(ids),
        unjudged=len(queries) - len(ids),
        missing_text=missing_text,
        ef_search=service.ef_search,
        results=results,
    )
