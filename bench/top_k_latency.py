"""Retrieve latency at 10 and at 100 results, plain and with returnFormatted, on msmarco-5k.

    python -m bench.top_k_latency [--passes 4]

Uses store `msmarco-5k` of the embedded PostgreSQL under .data (ingested first when missing, as
`make bench` does). Each of the set's 50 queries is embedded once beforehand; then, interleaved query
by query so that every variant meets the same load:

- `RetrievalService.retrieve` (naive engine, `similarityTopK` k, no cache, the query vector given):
  search, threshold and response model, without and with `returnFormatted` (context packing and
  token counting with the model's tokenizer), and with an MMR rerank k deep. The tokenizer keeps the
  counts of the chunks it counted, so from the second pass on `returnFormatted` counts only headers;
  "returnFormatted, nothing counted before" packs the plain answer with a fresh counter every time,
  as the first request to see those chunks does;
- POST /api/v1/chunks/similarity-search (`topK` k) through the FastAPI app in process (httpx
  TestClient): the same search plus request parsing and JSON of the answer.

The first pass warms the pages and the tokenizer and is not counted; p50 and p99 are over the others.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from bench.common import load_queries, machine, median, percentile
from bench.core import STORE, ingest

DEPTHS = (10, 100)


def variants(vector: list[float], k: int) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (route, body) of each variant at depth k; route "service" means a direct call."""
    base = {"grade": 0.0, "store": STORE, "cacheTTLms": 0, "similarityTopK": k}
    return {
        "retrieve": ("service", {**base, "engineName": "naive"}),
        "retrieve, returnFormatted": ("service", {**base, "engineName": "naive", "returnFormatted": True}),
        "retrieve, returnFormatted, nothing counted before": ("cold", {**base, "engineName": "naive"}),
        "retrieve, MMR rerank": ("service", {**base, "rerank": {"strategy": "mmr", "topK": k}}),
        "HTTP similarity-search": (
            "/api/v1/chunks/similarity-search",
            {"queryEmbedding": vector, "topK": k, "store": STORE, "cacheTTLms": 0},
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=4, help="passes, the first not counted")
    args = parser.parse_args()

    from fastapi.testclient import TestClient

    from retrieval_core.api.app import create_app
    from retrieval_core.backends.prompt_context import with_context
    from retrieval_core.container import get_service
    from retrieval_core.grants import OPEN_GRANT
    from retrieval_core.schemas.retrieve import RetrieveRequest
    from retrieval_core.search.token_count import ModelTokenizer, token_counter

    ingest(fresh=False)
    service = get_service()
    texts = list(load_queries().values())
    vectors = service.embedder.embed(texts, "query")
    client = TestClient(create_app())
    counter = token_counter()
    assert isinstance(counter, ModelTokenizer), "the model's tokenizer.json is not installed"

    def caller(route: str, body: dict[str, Any], text: str, vector: list[float]) -> Callable[[], object]:
        if route == "service" or route == "cold":
            request = RetrieveRequest.model_validate({**body, "query": text})

            def retrieve() -> Any:
                return service.retrieve(request, lambda _query: vector, grant=OPEN_GRANT)[0]

            if route == "service":
                return retrieve
            return lambda: with_context(retrieve(), None, ModelTokenizer(counter.tokenizer))
        return lambda: _ok(client.post(route, json=body))

    samples: dict[tuple[str, int], list[float]] = {}
    for done in range(args.passes):
        for text, vector in zip(texts, vectors, strict=True):
            for k in DEPTHS:
                for name, (route, body) in variants(vector, k).items():
                    call = caller(route, body, text, vector)
                    start = time.perf_counter()
                    call()
                    if done:
                        samples.setdefault((name, k), []).append((time.perf_counter() - start) * 1000)
    print(f"{machine()}; store {STORE}, 50 queries x {args.passes - 1} passes")
    print("| variant | p50 k=10 (ms) | p50 k=100 (ms) | k=100 / k=10 | p99 k=10 | p99 k=100 |")
    print("|---|---|---|---|---|---|")
    for name in variants([0.0], 10):
        low, high = samples[(name, 10)], samples[(name, 100)]
        print(
            f"| {name} | {median(low):.2f} | {median(high):.2f} | {median(high) / median(low):.1f}x "
            f"| {percentile(low, 99):.2f} | {percentile(high, 99):.2f} |"
        )


def _ok(response: Any) -> None:
    assert response.status_code == 200, response.text


if __name__ == "__main__":
    main()
