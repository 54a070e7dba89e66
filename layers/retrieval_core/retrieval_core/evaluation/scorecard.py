"""POST /stores/{store}/evaluate: judged queries ranked by each method and scored at k.

The methods run through `runner.service_method`, as `retrieval eval`'s do: each ranks SEARCH_DEPTH
chunks (grade 0, no cache), a document ranks by its best chunk, and nDCG@k and recall@k are scored on
the first k documents with the metrics of ranking_metrics.py. Each query is embedded once, in batches,
and its vector reused by every method.

The work stops early, and says so, rather than being killed: before each query when the request's
deadline leaves less than the slowest query took so far plus ANSWER_RESERVE_S, and when the next query's
scores would not fit in one Lambda response.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from retrieval_core.evaluation.ranking_metrics import ndcg_at, percentile, recall_at
from retrieval_core.evaluation.runner import HYBRID, Method, MethodSpec, Query, judged_queries, service_method
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.schemas.common import GEMINI_STORE_PREFIX
from retrieval_core.schemas.evaluate import (
    SEARCH_DEPTH,
    EvaluateRequest,
    EvaluateResponse,
    MethodScore,
    QueryMethodScore,
    QueryScore,
    StoppedBy,
)
from retrieval_core.search.reply_size import LAMBDA_PAYLOAD_BYTES, RESPONSE_ENVELOPE_BYTES, lambda_body_bytes

if TYPE_CHECKING:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.clients.retry import Deadline
    from retrieval_core.grants import Grant

# The keyword search alone (no embedding, only the chunks the keyword query matches).
KEYWORD = MethodSpec("keyword", {"engineName": "naive", "searchMode": "keyword"})
DEFAULT_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("dense", {"engineName": "naive"}),
    MethodSpec("hybrid", HYBRID),
    KEYWORD,
)
EMBED_BATCH = 32
# Kept back from the deadline for building and sending the answer.
ANSWER_RESERVE_S = 0.5
# The answer's JSON besides its queries: the methods' means and the counts.
SUMMARY_BYTES = 16_384

Embed = Callable[[list[str]], list[list[float]]]
Qrels = dict[str, dict[str, int]]


@dataclass(slots=True)
class Tally:
    """What a run did: each scored query in order, each method's latencies, and why it stopped early."""

    queries: list[QueryScore] = field(default_factory=list)
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    stopped_by: StoppedBy | None = None


def scorecard(
    service: RetrievalService, store: str, request: EvaluateRequest, grant: Grant, deadline: Deadline
) -> EvaluateResponse:
    """Score `request`'s judged queries on `store` with each of its methods (the defaults when none).

    `grant` needs the read scope (403) and the store (404, as if unknown); a Gemini File Search store is
    a 422. Works within `deadline` and one Lambda response; what it left undone, it says.
    """
    if store.startswith(GEMINI_STORE_PREFIX):
        raise InvalidRequestError.for_field(
            "store",
            "Gemini File Search stores are not evaluated: the evaluation ranks a pgvector store's own "
            "chunks by documentId",
            "unsupported",
        )
    grant.require_scope("read")
    found = service.get_store(store)
    grant.require_store(found.name, store)
    qrels = qrels_of(request)
    texts = {q.id: q.text for q in request.queries}
    judged, _ = judged_queries(texts, qrels)
    if not judged:
        raise InvalidRequestError.for_field(
            "judgments", "no query has a judgment of relevance 1 or more: nothing to score", "value_error"
        )
    specs = method_specs(request)
    methods = [service_method(service, found.name, spec, SEARCH_DEPTH, grant) for spec in specs]

    def embed(batch: list[str]) -> list[list[float]]:
        return service.embedder.embed(batch, "query")

    # One expensive request, as a batch is: the whole run holds one of the process's expensive slots.
    with service.expensive_slots.hold():
        tally = run(methods, [(q, texts[q]) for q in judged], qrels, request.k, embed, deadline)
    return EvaluateResponse(
        store=found.name,
        k=request.k,
        complete=tally.stopped_by is None,
        stopped_by=tally.stopped_by,
        scored_queries=len(tally.queries),
        skipped_queries=len(request.queries) - len(judged),
        methods=[method_score(spec, tally) for spec in specs],
        queries=tally.queries,
    )


def method_specs(request: EvaluateRequest) -> list[MethodSpec]:
    """The request's methods as the runner's specs; the defaults when it names none."""
    if request.methods is None:
        return list(DEFAULT_METHODS)
    return [MethodSpec(m.name, m.options) for m in request.methods]


def qrels_of(request: EvaluateRequest) -> Qrels:
    """query id -> {documentId: relevance}, as a BEIR qrels file reads."""
    qrels: Qrels = {}
    for judgment in request.judgments:
        qrels.setdefault(judgment.query_id, {})[judgment.document_id] = judgment.relevance
    return qrels


def run(
    methods: Sequence[Method],
    queries: Sequence[tuple[str, str]],
    qrels: Mapping[str, Mapping[str, int]],
    k: int,
    embed: Embed,
    deadline: Deadline,
    room_bytes: int = LAMBDA_PAYLOAD_BYTES - RESPONSE_ENVELOPE_BYTES - SUMMARY_BYTES,
) -> Tally:
    """Rank each (id, text) query with every method, in order, until done, out of time or out of room."""
    tally = Tally(latency_ms={m.name: [] for m in methods})
    vectors: list[list[float]] = []
    slowest_s = 0.0
    for index, (query_id, text) in enumerate(queries):
        remaining = deadline.remaining_s()
        if remaining is not None and remaining < slowest_s + ANSWER_RESERVE_S:
            tally.stopped_by = "deadline"
            break
        started = time.perf_counter()
        if index == len(vectors):
            vectors += embed([t for _, t in queries[index : index + EMBED_BATCH]])
        query = Query(query_id, text, vectors[index])
        judged = qrels[query_id]
        scores: dict[str, QueryMethodScore] = {}
        latency_ms: dict[str, float] = {}
        for method in methods:
            ranked_at = time.perf_counter()
            ranking = method.rank(query)
            latency_ms[method.name] = (time.perf_counter() - ranked_at) * 1000
            scores[method.name] = QueryMethodScore(
                ndcg=ndcg_at(ranking, judged, k),
                recall=recall_at(ranking, judged, k),
                top_documents=ranking[:k],
            )
        relevant = sum(1 for grade in judged.values() if grade >= 1)
        scored = QueryScore(id=query_id, text=text, relevant_documents=relevant, scores=scores)
        room_bytes -= lambda_body_bytes(scored.model_dump(mode="json"))
        if room_bytes < 0:
            tally.stopped_by = "responseSize"
            break
        tally.queries.append(scored)
        for name, ms in latency_ms.items():
            tally.latency_ms[name].append(ms)
        slowest_s = max(slowest_s, time.perf_counter() - started)
    return tally


def method_score(spec: MethodSpec, tally: Tally) -> MethodScore:
    """`spec`'s means over the tally's queries; None when none was scored."""
    done = [q.scores[spec.name] for q in tally.queries]
    latencies = tally.latency_ms.get(spec.name, [])
    return MethodScore(
        name=spec.name,
        options=dict(spec.options),
        ndcg=sum(s.ndcg for s in done) / len(done) if done else None,
        recall=sum(s.recall for s in done) / len(done) if done else None,
        median_latency_ms=percentile(latencies, 0.5) if latencies else None,
    )
