"""Run retrieval methods over questions judged inside long documents and tabulate where the answer got to.

For each question, each method is one `RetrievalService.retrieve` of DEPTH chunks with the question's
precomputed vector and no cache; the chunks are judged by `evidence.Matcher`, and the same answer is
packed into the service's own prompt-ready context (`returnFormatted` with `maxContextTokens`: the
packing of backends/prompt_context.py, search/context_packing.py) at each budget of BUDGETS. Reported
per method: chunk hit@1/5/20 and MRR@20, document hit@5, answer in context at each budget, p50
latency; paired bootstrap intervals of the differences against the first method.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval_core.evaluation.evidence import Evidence, Matcher, first_hit
from retrieval_core.evaluation.ranking_metrics import documents_of, paired_bootstrap, percentile
from retrieval_core.evaluation.runner import MethodSpec, Query
from retrieval_core.grants import OPEN_GRANT

if TYPE_CHECKING:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.search.token_count import TokenCounter

DEPTH = 50
HIT_KS = (1, 5, 20)
MRR_K = 20
DOCUMENT_K = 5
BUDGETS = (500, 1000, 2000, 4000)

# Dense, and hybrid with the service's own fusion defaults (weighted, max-scaled, 0.7 / 0.3); each also
# with every result joined to one neighbour on either side (`expand`).
NEIGHBOURS = {"expand": {"before": 1, "after": 1}}
LONG_METHODS: tuple[MethodSpec, ...] = (
    MethodSpec("dense", {"engineName": "naive"}),
    MethodSpec("hybrid", {"engineName": "naive", "searchMode": "hybrid"}),
    MethodSpec("dense, neighbours 1/1", {"engineName": "naive", **NEIGHBOURS}),
    MethodSpec("hybrid, neighbours 1/1", {"engineName": "naive", "searchMode": "hybrid", **NEIGHBOURS}),
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question under one method."""

    first_hit: int | None  # rank of the first chunk that holds the evidence, within DEPTH
    document_hit: bool  # a judged document among the first DOCUMENT_K documents
    in_context: tuple[bool, ...]  # per budget of BUDGETS
    ms: float


@dataclass
class LongResult:
    """A method's outcomes, one per question, in question order."""

    name: str
    how: str
    outcomes: list[Outcome] = field(default_factory=list)

    def hits(self, k: int) -> list[float]:
        return [float(o.first_hit is not None and o.first_hit <= k) for o in self.outcomes]

    def reciprocal_ranks(self) -> list[float]:
        return [1 / o.first_hit if o.first_hit and o.first_hit <= MRR_K else 0.0 for o in self.outcomes]

    def document_hits(self) -> list[float]:
        return [float(o.document_hit) for o in self.outcomes]

    def contexts(self, budget: int) -> list[float]:
        index = BUDGETS.index(budget)
        return [float(o.in_context[index]) for o in self.outcomes]

    def p50_ms(self) -> float:
        return percentile([o.ms for o in self.outcomes], 0.5)


def run_method(
    service: RetrievalService,
    store: str,
    spec: MethodSpec,
    queries: Sequence[Query],
    judged: Mapping[str, Evidence],
    counter: TokenCounter,
    progress: Callable[[int], None] | None = None,
) -> LongResult:
    """`spec` over every query of `queries` (each with its evidence in `judged`)."""
    from retrieval_core.schemas.retrieve import RetrieveRequest, no_threshold
    from retrieval_core.search.context_packing import citation_header, pack

    result = LongResult(spec.name, ", ".join(f"{k}: {v}" for k, v in spec.options.items()))
    grade = no_threshold(spec.options)
    for query in queries:
        matcher = Matcher(judged[query.id])
        request = RetrieveRequest.model_validate(
            {**spec.options, "query": query.text, **grade, "store": store, "cacheTTLms": 0}
        )
        started = time.perf_counter()
        response, _ = service.retrieve(request, vector_of(query), grant=OPEN_GRANT, depth=DEPTH)
        ms = (time.perf_counter() - started) * 1000
        results = response.results[:DEPTH]
        chunks = [(str(r.metadata["documentId"]), r.content) for r in results]
        documents = documents_of(document for document, _ in chunks)[:DOCUMENT_K]
        # The packing of `returnFormatted` (backends/prompt_context.py) at each budget.
        headers = [citation_header(r.metadata) for r in results]
        contents = [r.content for r in results]
        contexts = tuple(
            matcher.context_holds(pack(contents, headers, counter, budget).text) for budget in BUDGETS
        )
        result.outcomes.append(
            Outcome(
                first_hit(matcher, chunks),
                any(d in matcher.evidence.documents for d in documents),
                contexts,
                ms,
            )
        )
        if progress is not None:
            progress(1)
    return result


def vector_of(query: Query) -> Callable[[str], Sequence[float]]:
    """The query's own embedding, in place of embedding its text again."""
    return lambda _: query.vector


def _cell(values: Sequence[float], baseline: Sequence[float] | None) -> str:
    mean = statistics.fmean(values)
    if baseline is None or values is baseline:
        return f"{mean:.3f}"
    difference = paired_bootstrap(values, baseline)
    return f"{mean:.3f} ({difference.mean:+.3f} [{difference.low:+.3f}, {difference.high:+.3f}])"


def table(results: Sequence[LongResult]) -> str:
    """The Markdown table: each method's figures; differences against the first method in brackets."""
    header = (
        "| method | "
        + " | ".join(f"hit@{k}" for k in HIT_KS)
        + f" | MRR@{MRR_K} | doc hit@{DOCUMENT_K} | "
        + " | ".join(f"in context @{b:,}" for b in BUDGETS)
        + " | p50 ms |"
    )
    rule = "|" + "---|" * (len(HIT_KS) + len(BUDGETS) + 4)
    lines = [header, rule]
    first = results[0]
    for result in results:
        base = None if result is first else first
        cells = [_cell(result.hits(k), base.hits(k) if base else None) for k in HIT_KS]
        cells.append(_cell(result.reciprocal_ranks(), base.reciprocal_ranks() if base else None))
        cells.append(_cell(result.document_hits(), base.document_hits() if base else None))
        cells += [_cell(result.contexts(b), base.contexts(b) if base else None) for b in BUDGETS]
        cells.append(f"{result.p50_ms():.1f}")
        lines.append(f"| {result.name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class LongReport:
    """What `run_long_evaluation` found: how many questions ran, and the table."""

    questions: int
    results: list[LongResult]
    table: str


def run_long_evaluation(
    service: RetrievalService,
    store: str,
    folder: Path,
    methods: Sequence[MethodSpec] = LONG_METHODS,
    limit: int | None = None,
    progress: bool = True,
) -> LongReport:
    """Every method over the questions of `folder` (queries.jsonl, judgments.jsonl) against `store`, a
    store loaded with the folder's documents/; the first `limit` judged questions only when given."""
    from tqdm import tqdm

    from retrieval_core.evaluation.beir import read_queries
    from retrieval_core.evaluation.evidence import read_judgments
    from retrieval_core.evaluation.runner import embed_queries
    from retrieval_core.search.token_count import token_counter
    from retrieval_core.settings import get_settings

    texts = read_queries(folder / "queries.jsonl")
    judged = read_judgments(folder / "judgments.jsonl")
    ids = [q for q in texts if q in judged][:limit]
    if not ids:
        raise ValueError(f"{folder}: no question of queries.jsonl is judged in judgments.jsonl")
    queries = embed_queries(service.embedder, texts, ids, progress)
    counter = token_counter(get_settings().local_model_dir)
    results = []
    for spec in methods:
        with tqdm(total=len(queries), desc=spec.name, unit=" questions", disable=not progress) as bar:
            results.append(run_method(service, store, spec, queries, judged, counter, bar.update))
    return LongReport(len(queries), results, table(results))
