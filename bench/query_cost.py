"""What each kind of retrieve costs: the measurements behind cost.py's "expensive" lines.

In-process, against the embedded PostgreSQL holding msmarco-5k (ingested first when missing), caching
off. For each kind, the median over `--repeat` runs of the search step (`pipeline.timingsMs.search`) and
of the whole retrieve; then the local model's time to embed a short and a long query. Run with
`PYTHONPATH=layers/retrieval_core:. python -m bench.query_cost`.
"""

from __future__ import annotations

import argparse
import itertools
import os
import string
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import REPO, load_passages, machine, median
from bench.core import STORE
from bench.core import ingest as ensure_corpus

QUESTION = "what is the capital of france"


def negated_terms(count: int) -> str:
    """The issue's attack: `-ab -ac ...`, 1,600 of them in 7,323 characters."""
    letters = string.ascii_lowercase
    two = ["-" + a + b for a, b in itertools.product(letters, repeat=2)]
    three = ["-" + "".join(t) for t in itertools.product(letters, repeat=3)]
    return " ".join((two + three)[:count])


def corpus_words(count: int) -> list[str]:
    """The first `count` distinct alphabetic words of the corpus: terms the store's chunks hold."""
    words: dict[str, None] = {}
    for passage in load_passages(500):
        for word in passage.lower().split():
            if word.isalpha():
                words.setdefault(word)
    return list(words)[:count]


def kinds() -> dict[str, dict[str, Any]]:
    """Retrieve bodies, ordinary to dearest."""
    mmr = {"rerank": {"enabled": True, "strategy": "mmr", "topK": 50}, "similarityTopK": 50}
    vocabulary = corpus_words(1_500)
    return {
        "dense, top-10": {"query": QUESTION},
        "hybrid, 6 words": {"query": QUESTION, "useHybrid": True},
        "hybrid, 6 words, 50 deep": {"query": QUESTION, "useHybrid": True, "similarityTopK": 50},
        "hybrid, 16 corpus words": {"query": " ".join(vocabulary[:16]), "useHybrid": True},
        "hybrid, 16 corpus words, 50 deep": {
            "query": " ".join(vocabulary[:16]),
            "useHybrid": True,
            "similarityTopK": 50,
        },
        "hybrid, 64 corpus words": {"query": " ".join(vocabulary[:64]), "useHybrid": True},
        "hybrid, 8,000 chars of corpus words": {"query": " ".join(vocabulary)[:8000], "useHybrid": True},
        "hybrid, 1,600 negated words": {"query": negated_terms(1600), "useHybrid": True},
        "MMR 50 deep": {"query": QUESTION, **mmr},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    from retrieval_core.container import get_service
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    ensure_corpus(fresh=False)
    service = get_service()
    service.embedder.embed(["warm"], "query")
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.2f} (other work running)")
    print(f"command: PYTHONPATH=layers/retrieval_core:. python -m bench.query_cost --repeat {args.repeat}")
    print(f"store {STORE}, grade 0, cacheTTLms 0, in-process (no HTTP)\n")
    print("| retrieve | search p50 (ms) | whole retrieve p50 (ms) | warnings |")
    print("|---|---|---|---|")
    for name, body in kinds().items():
        request = RetrieveRequest.model_validate({"grade": 0.0, "store": STORE, "cacheTTLms": 0, **body})
        search, total, warnings = [], [], []
        for _ in range(args.repeat):
            started = time.perf_counter()
            response, _ = service.retrieve(request, grant=OPEN_GRANT)
            total.append((time.perf_counter() - started) * 1000)
            search.append(response.pipeline.timings_ms.search)
            warnings = response.pipeline.warnings
        note = "; ".join(w.split(":")[0] for w in warnings) or "-"
        print(f"| {name} | {median(search):.1f} | {median(total):.1f} | {note} |")
    print("\n| query embedded by the local model | p50 (ms) |")
    print("|---|---|")
    for text in (QUESTION, "word " * 1600):
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            service.embedder.embed([text], "query")
            times.append((time.perf_counter() - started) * 1000)
        print(f"| {len(text):,} characters | {median(times):.1f} |")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
