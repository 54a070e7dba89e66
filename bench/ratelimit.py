"""Rate limit benchmark: what counting a request adds, in process and on moto_server.

Run with `make bench-ratelimit`. A trivial authenticated route of the real app (API key auth, the rate
limit middleware, the body limit) is called through TestClient with the limit off (RATE_LIMIT_REQUESTS
0: the counter is never called), counted in process, and counted in DynamoDB on moto_server; then the
limiter's check alone. moto_server is a local Python process, not DynamoDB: its round trip says nothing
of DynamoDB's, only that a counted request makes one.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from datetime import UTC, datetime

from fastapi import APIRouter
from fastapi.testclient import TestClient

from bench.common import machine, median, percentile, timed_ms
from tests.servers import MotoServer, create_cache_table

REQUESTS = 2000
KEY = "rk_bench_" + "ab" * 16


def main() -> None:
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    os.environ["API_KEYS"] = json.dumps(
        [{"name": "bench", "sha256": digest, "stores": ["*"], "scopes": ["read"]}]
    )
    os.environ.update(
        AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1"
    )
    rows = []
    with MotoServer() as moto:
        table = f"bench-ratelimit-{uuid.uuid4().hex[:8]}"
        create_cache_table(moto.client("dynamodb"), table)
        for label, env in (
            ("limit off (RATE_LIMIT_REQUESTS=0)", {"RATE_LIMIT_REQUESTS": "0"}),
            ("in process (no CACHE_TABLE_NAME)", {"RATE_LIMIT_REQUESTS": "1000000"}),
            (
                "DynamoDB on moto_server",
                {
                    "RATE_LIMIT_REQUESTS": "1000000",
                    "CACHE_TABLE_NAME": table,
                    "DYNAMODB_ENDPOINT_URL": moto.endpoint_url,
                },
            ),
        ):
            rows.append((label, *http_ms(env), *check_ms(env)))
    print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}; {REQUESTS} requests each")
    print("| counter | request p50 ms | request p99 ms | check p50 ms | check p99 ms |")
    print("|---|---|---|---|---|")
    for label, p50, p99, c50, c99 in rows:
        print(f"| {label} | {p50:.2f} | {p99:.2f} | {c50:.3f} | {c99:.3f} |")


def configure(env: dict[str, str]) -> None:
    from retrieval_core.ratelimit.limiter import replace_rate_limiter
    from retrieval_core.settings import get_settings

    for name in ("RATE_LIMIT_REQUESTS", "CACHE_TABLE_NAME", "DYNAMODB_ENDPOINT_URL"):
        os.environ.pop(name, None)
    os.environ.update(env)
    get_settings.cache_clear()
    replace_rate_limiter(None)


def http_ms(env: dict[str, str]) -> tuple[float, float]:
    """p50 and p99 of a request to a route that does nothing, through every middleware."""
    from retrieval_core.api.app import create_app

    configure(env)
    router = APIRouter()

    @router.get("/api/v1/bench/ping")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    with TestClient(create_app(router)) as client:
        headers = {"x-api-key": KEY}

        def call() -> None:
            assert client.get("/api/v1/bench/ping", headers=headers).status_code == 200

        timed_ms(call, 50)  # warm: the boto3 client, the key list
        samples = timed_ms(call, REQUESTS)
    return median(samples), percentile(samples, 99)


def check_ms(env: dict[str, str]) -> tuple[float, float]:
    """p50 and p99 of the limiter's check alone (one UpdateItem on DynamoDB)."""
    from retrieval_core.ratelimit.limiter import get_rate_limiter

    configure(env)
    limiter = get_rate_limiter()
    subject = "key:" + uuid.uuid4().hex
    timed_ms(lambda: limiter.check(subject, None), 50)
    samples = timed_ms(lambda: limiter.check(subject, None), REQUESTS)
    return median(samples), percentile(samples, 99)


if __name__ == "__main__":
    main()
