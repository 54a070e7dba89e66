"""What matchedTerms adds to a hybrid retrieve, on the msmarco-5k store `make eval` loads.

Run `make eval` first (it loads store `eval-msmarco-5k` and caches the query vectors). Then

    python -m bench.matched_terms_latency [--requests 200] [--top-k 20]

times `RetrievalService.retrieve` with the default hybrid fusion (no cache, the query's vector
precomputed so that embedding is not timed), with matchedTerms and without: the same requests, the two
interleaved request by request so that each meets the same load; "without" skips the one statement
that finds the matched words (its results carry [] instead). Two shapes: the default engine (5 results)
and the naive engine (every candidate of `similarityTopK` from each list, up to twice as many). The
first pass over the queries warms the pages and is not counted.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from bench.common import EVAL_DIR, load_queries, machine, median
from bench.eval import VECTORS, store_name

SHAPES: dict[str, dict[str, Any]] = {
    "default engine (5 results)": {"engineName": "default"},
    "naive engine (every candidate)": {"engineName": "naive"},
}


def fixed_vector(vector: Sequence[float]) -> Callable[[str], Sequence[float]]:
    """An embedding function answering `vector` (precomputed: embedding is not timed)."""
    return lambda _query: vector


@contextmanager
def without_matched_terms(service: Any) -> Iterator[None]:
    """`service` answering with [] for every result's matched words, without the statement."""
    service._matched_terms = lambda _store, _keyword, kept: [[] for _ in kept]
    try:
        yield
    finally:
        del service._matched_terms


def measure(requests: int, top_k: int) -> dict[str, tuple[float, float, float]]:
    """Per shape: the median ms with matchedTerms, without, and the median of the paired differences."""
    from bench.vector_cache import CachedEmbedder
    from retrieval_core.container import get_service
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest

    service = get_service()
    store = store_name(EVAL_DIR)
    texts = list(load_queries().values())
    embedder = CachedEmbedder(service.embedder, VECTORS)
    vectors = embedder.embed(texts, "query")
    embedder.close()
    order = [i % len(texts) for i in range(len(texts) + requests)]  # the first pass is the warm-up
    results = {}
    for shape, options in SHAPES.items():
        with_ms: list[float] = []
        without_ms: list[float] = []
        for done, index in enumerate(order):
            request = RetrieveRequest.model_validate(
                {
                    **options,
                    "useHybrid": True,
                    "similarityTopK": top_k,
                    "query": texts[index],
                    "grade": 0.0,
                    "store": store,
                    "cacheTTLms": 0,
                }
            )
            embed = fixed_vector(vectors[index])
            for samples, skip in ((with_ms, False), (without_ms, True)):
                start = time.perf_counter()
                if skip:
                    with without_matched_terms(service):
                        service.retrieve(request, embed, grant=OPEN_GRANT)
                else:
                    service.retrieve(request, embed, grant=OPEN_GRANT)
                if done >= len(texts):
                    samples.append((time.perf_counter() - start) * 1000)
        paired = [a - b for a, b in zip(with_ms, without_ms, strict=True)]
        results[shape] = (median(with_ms), median(without_ms), median(paired))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="timed requests per shape (default 200)")
    parser.add_argument("--top-k", type=int, default=20, help="similarityTopK (default 20)")
    args = parser.parse_args()
    results = measure(args.requests, args.top_k)
    print(f"{machine()}; {args.requests} hybrid requests per shape, similarityTopK {args.top_k}")
    print("| shape | with matchedTerms p50 | without p50 | median paired difference |")
    print("|---|---|---|---|")
    for shape, (with_p50, without_p50, difference) in results.items():
        print(f"| {shape} | {with_p50:.2f} ms | {without_p50:.2f} ms | {difference:+.2f} ms |")


if __name__ == "__main__":
    main()
