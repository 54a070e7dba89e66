"""Cache benchmark: hit and miss latency through the Lambda handler, DynamoDB on moto_server.

Run with `make bench-cache`. Uses the msmarco-5k store that `make bench` ingests (falls back
to the sample store), the local embedding model, and the retrieve handler in this process.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import os
import uuid
from datetime import UTC, datetime
from functools import partial
from types import SimpleNamespace
from typing import Any

from bench.common import (
    REPO,
    bench_store,
    load_queries,
    machine,
    median,
    moto_environment,
    percentile,
    timed_ms,
)
from tests.servers import MotoServer, create_cache_table


def main() -> None:
    with MotoServer() as moto:
        run(moto)


def run(moto: MotoServer) -> None:
    table = f"bench-cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    os.environ.update(moto_environment(), CACHE_TABLE_NAME=table, DYNAMODB_ENDPOINT_URL=moto.endpoint_url)
    from retrieval_core.container import get_service

    service = get_service()  # the embedded database of .data unless DATABASE_URL is set
    store = bench_store(service)

    spec = importlib.util.spec_from_file_location("retrieve_app", REPO / "functions" / "retrieve" / "app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    template = json.loads((REPO / "events" / "retrieve.json").read_text())
    context = SimpleNamespace(
        function_name="bench",
        memory_limit_in_mb=1024,
        aws_request_id="bench",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:bench",
    )

    def invoke(query: str) -> dict[str, Any]:
        event = copy.deepcopy(template)
        event["body"] = json.dumps({"query": query, "grade": 0.0, "similarityTopK": 10, "store": store})
        with contextlib.redirect_stdout(io.StringIO()):  # Powertools prints its JSON logs and metrics
            response: dict[str, Any] = module.handler(event, context)
        assert response["statusCode"] == 200, response
        return response

    service.embedder.embed(["warm up"], "query")
    invoke("warm up the handler")
    miss_ms: list[float] = []
    hit_ms: list[float] = []
    for query in load_queries().values():
        miss_ms += timed_ms(partial(invoke, query), 1)
        hit_ms += timed_ms(partial(invoke, query), 1)
    assert invoke(query)["headers"]["x-cache"] == "hit"

    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}")
    print(f"command: make bench-cache (store {store}, top-10, local model, DynamoDB on moto_server)")
    print()
    print("| path | p50 (ms) | p99 (ms) | n |")
    print("|---|---|---|---|")
    for label, samples in (("miss (embed + SQL + cache write)", miss_ms), ("hit", hit_ms)):
        print(f"| {label} | {median(samples):.2f} | {percentile(samples, 99):.2f} | {len(samples)} |")
    print()
    print(f"hit / miss (medians): {median(hit_ms) / median(miss_ms):.2f}")


if __name__ == "__main__":
    os.chdir(REPO)
    main()
