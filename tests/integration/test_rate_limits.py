"""Per-credential rate limits through real boto3 on moto_server, the app and Lambda.

moto_server stands in for DynamoDB: it shows the requests are well formed and the condition holds, not
DynamoDB's latency or its behaviour under contention across machines.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from retrieval_core.exceptions import RateLimitedError
from retrieval_core.observability import metrics
from retrieval_core.ratelimit.counters import DynamoDBCounter, MemoryCounter
from retrieval_core.ratelimit.limiter import (
    PAUSE_AFTER_FAILURE_S,
    RateLimiter,
    build_rate_limiter,
    get_rate_limiter,
    replace_rate_limiter,
)
from retrieval_core.ratelimit.window import RateLimit
from tests.fakes.clock import EPOCH, ManualClock
from tests.integration.test_grants_lambda import CONTEXT, event_with
from tests.servers import MotoServer, create_cache_table, free_port

SEARCH = "/api/v1/chunks/similarity-search"
RETRIEVE = "/api/v1/rag/retrieve"
BATCH = "/api/v1/rag/retrieve/batch"
VECTOR = [0.05] * 384
START = EPOCH  # a multiple of 60 and of 10: the start of a window

LIMITED = "rk_limited_" + "a1" * 16
OTHER = "rk_other_" + "b2" * 16
BATCHER = "rk_batch_" + "c3" * 16
SMALL = "rk_small_" + "d4" * 16


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def entry(name: str, key: str, rate: dict[str, int] | None = None) -> dict[str, Any]:
    grant: dict[str, Any] = {"name": name, "sha256": digest(key), "stores": ["*"], "scopes": ["read"]}
    return grant if rate is None else {**grant, "rateLimit": rate}


API_KEYS = [
    entry("bursty-7", LIMITED, {"requests": 200, "windowSeconds": 60}),
    entry("other", OTHER),  # the service default
    entry("batcher", BATCHER, {"requests": 5, "windowSeconds": 60}),
    entry("small", SMALL, {"requests": 3, "windowSeconds": 10}),
]


@pytest.fixture(scope="module")
def serial_moto() -> Iterator[MotoServer]:
    """moto_server applying one request at a time: each conditional update atomic, as in DynamoDB."""
    with MotoServer(serial=True) as server:
        yield server


def dynamodb_limiter(moto: MotoServer, table: str, limit: RateLimit, clock: ManualClock) -> RateLimiter:
    """One Lambda instance's limiter: its own boto3 client on the shared table."""
    return RateLimiter(
        DynamoDBCounter(table, lambda: moto.client("dynamodb")), limit, shared=True, clock=clock
    )


def test_two_instances_sharing_the_table_never_let_more_than_the_limit_through(
    serial_moto: MotoServer,
) -> None:
    moto, table = serial_moto, f"cache-{uuid.uuid4().hex[:8]}"
    create_cache_table(moto.client("dynamodb"), table)
    clock = ManualClock()
    instances = [dynamodb_limiter(moto, table, RateLimit(25, 60), clock) for _ in range(2)]

    def attempt(which: int) -> tuple[int, bool]:
        try:
            instances[which].check("key:shared", None)
        except RateLimitedError:
            return which, False
        return which, True

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(attempt, [i % 2 for i in range(80)]))
    passed = [which for which, ok in outcomes if ok]
    assert len(passed) == 25
    assert set(passed) == {0, 1}  # both instances let some through: the count is theirs together
    item = moto.client("dynamodb").get_item(
        TableName=table, Key={"pk": {"S": "ratelimit#key:shared#60#1800000000"}}
    )["Item"]
    assert item["count"] == {"N": "25"}
    assert item["expiresAt"] == {"N": str(int(START) + 60 + 60)}  # the TTL attribute: window end + 60 s


def test_the_next_window_starts_from_zero_on_the_shared_table(moto: MotoServer, table: str) -> None:
    clock = ManualClock()
    first, second = (dynamodb_limiter(moto, table, RateLimit(600, 60), clock) for _ in range(2))
    own = RateLimit(2, 10)
    first.check("key:a", own)
    second.check("key:a", own)
    clock.now += 7.2
    with pytest.raises(RateLimitedError) as refused:
        first.check("key:a", own)
    assert refused.value.retry_after_s == 3
    clock.now += 2.8  # exactly the next window
    second.check("key:a", own)
    first.check("key:a", own)
    with pytest.raises(RateLimitedError):
        second.check("key:a", own)


@pytest.mark.parametrize("fault", ["unreachable", "missing table"])
def test_an_unusable_counter_lets_requests_through_with_a_warning_and_a_metric(
    moto: MotoServer, configure: Any, aws_env: None, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}" if fault == "unreachable" else moto.endpoint_url
    settings = configure(
        CACHE_TABLE_NAME=f"absent-{uuid.uuid4().hex[:8]}",
        DYNAMODB_ENDPOINT_URL=endpoint,
        RATE_LIMIT_REQUESTS="1",
    )
    clock = ManualClock()
    limiter = build_rate_limiter(settings, clock)
    before = metrics.counters["RateLimitError"]
    with caplog.at_level(logging.WARNING, logger="retrieval_core.ratelimit.limiter"):
        started = time.perf_counter()
        limiter.check("key:" + "0" * 32, None)
        failed_after_s = time.perf_counter() - started
        started = time.perf_counter()
        for _ in range(3):  # over the limit of 1: nothing is counted while DynamoDB is away
            limiter.check("key:" + "0" * 32, None)
        paused_s = time.perf_counter() - started
    assert failed_after_s < 1.5  # one attempt; a connection refused or an unknown table fails at once
    assert paused_s < 0.01  # the counter is not asked again during the pause
    assert metrics.counters["RateLimitError"] == before + 4
    assert (
        caplog.text.count("rate limit not checked, requests let through for 10 s: DynamoDB UpdateItem") == 1
    )
    clock.now += PAUSE_AFTER_FAILURE_S  # the counter is tried again, and fails again
    limiter.check("key:" + "0" * 32, None)
    assert caplog.text.count("rate limit not checked") == 2


def test_the_counter_follows_the_cache_setting(configure: Any, aws_env: None) -> None:
    local = configure()
    assert local.cache_table_name is None
    assert isinstance(get_rate_limiter().counter, MemoryCounter) and not get_rate_limiter().shared
    configure(CACHE_TABLE_NAME="some-table", RATE_LIMIT_REQUESTS="7", RATE_LIMIT_WINDOW_S="30")
    limiter = get_rate_limiter()
    assert isinstance(limiter.counter, DynamoDBCounter) and limiter.shared
    assert limiter.default == RateLimit(7, 30)
    assert limiter.counter._client is None  # no boto3 client until a request is counted


def key(value: str) -> dict[str, str]:
    return {"x-api-key": value}


@pytest.fixture()
def limited(
    client: TestClient, configure: Any, moto: MotoServer, table: str, aws_env: None
) -> tuple[TestClient, ManualClock]:
    """The app with API_KEYS and the limiter counting in `table` on moto, on a clock the test moves."""
    settings = configure(
        API_KEYS=json.dumps(API_KEYS), CACHE_TABLE_NAME=table, DYNAMODB_ENDPOINT_URL=moto.endpoint_url
    )
    clock = ManualClock()
    replace_rate_limiter(build_rate_limiter(settings, clock))
    return client, clock


def search(client: TestClient, api_key: str) -> Any:
    return client.post(SEARCH, json={"queryEmbedding": VECTOR, "topK": 1}, headers=key(api_key))


def test_the_201st_rapid_request_is_a_429_with_retry_after_and_other_keys_are_unaffected(
    limited: tuple[TestClient, ManualClock], moto: MotoServer, table: str
) -> None:
    client, clock = limited
    statuses = [search(client, LIMITED).status_code for _ in range(200)]
    assert statuses == [200] * 200
    clock.now += 15.5
    refused = search(client, LIMITED)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "45"  # 44.5 s left in the window, rounded up
    assert refused.json() == {
        "error": {
            "code": "rate_limited",
            "message": "rate limit of 200 requests per 60 s reached for this credential; retry in 45 s",
            "details": {"limit": 200, "windowSeconds": 60, "retryAfterSeconds": 45},
        }
    }
    for secret in (LIMITED, digest(LIMITED), "bursty-7"):
        assert secret not in refused.text
    assert search(client, OTHER).status_code == 200
    # Health and the API docs are never counted.
    assert client.get("/api/v1/health", headers=key(LIMITED)).status_code == 200
    assert client.get("/openapi.json", headers=key(LIMITED)).status_code == 200
    # Every other route is: the limit is the credential's, not the route's.
    assert (
        client.get("/api/v1/stores/resolve", params={"name": "sample"}, headers=key(LIMITED)).status_code
        == 429
    )
    assert client.post(RETRIEVE, json={"query": "q"}, headers=key(LIMITED)).status_code == 429
    assert client.get("/api/v1/stores", headers=key(LIMITED)).status_code == 429
    clock.now += 44.5  # the next window
    assert search(client, LIMITED).status_code == 200
    # The counters are keyed by a hash of the key: neither the key nor its digest reaches the table.
    counters = [item["pk"]["S"] for item in moto.client("dynamodb").scan(TableName=table)["Items"]]
    assert len(counters) == 3 and all(c.startswith("ratelimit#key:") for c in counters)
    assert not any(LIMITED in c or digest(LIMITED) in c or digest(LIMITED)[:32] in c for c in counters)
    # The OpenAPI document declares the 429.
    operation = client.get("/openapi.json", headers=key(OTHER)).json()["paths"][SEARCH]["post"]
    assert "429" in operation["responses"]


def test_a_wrong_key_is_a_401_not_a_429(limited: tuple[TestClient, ManualClock]) -> None:
    client, _ = limited
    assert search(client, "rk_wrong_" + "ee" * 16).status_code == 401


def test_a_batch_counts_each_item(limited: tuple[TestClient, ManualClock]) -> None:
    client, _ = limited
    three = {"requests": [{"query": "remote work", "grade": 0.0}] * 3}
    assert client.post(BATCH, json=three, headers=key(BATCHER)).status_code == 200  # 3 of 5
    refused = client.post(BATCH, json=three, headers=key(BATCHER))  # 1 counted on arrival, 2 more refused
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert client.post(RETRIEVE, json={"query": "q", "grade": 0.0}, headers=key(BATCHER)).status_code == 200
    assert search(client, BATCHER).status_code == 429


def test_the_in_process_counter_limits_without_dynamodb(client: TestClient, configure: Any) -> None:
    settings = configure(API_KEYS=json.dumps(API_KEYS))
    assert settings.cache_table_name is None
    clock = ManualClock()
    replace_rate_limiter(build_rate_limiter(settings, clock))
    assert [search(client, SMALL).status_code for _ in range(4)] == [200, 200, 200, 429]
    assert search(client, OTHER).status_code == 200
    clock.now += 10
    assert search(client, SMALL).status_code == 200


def test_a_jwt_subject_gets_the_default_limit_in_the_lambda_handler(
    sample_store: Any, configure: Any, moto: MotoServer, table: str, aws_env: None
) -> None:
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import retrieve

    settings = configure(
        POWERTOOLS_METRICS_NAMESPACE="Test",
        JWT_AUTH="true",
        RATE_LIMIT_REQUESTS="2",
        RATE_LIMIT_WINDOW_S="60",
        CACHE_TABLE_NAME=table,
        DYNAMODB_ENDPOINT_URL=moto.endpoint_url,
    )
    replace_rate_limiter(build_rate_limiter(settings, ManualClock(START + 20)))
    handler = build_handler(retrieve.router)

    def token(subject: str) -> dict[str, Any]:
        return {"sub": subject, "scope": "retrieval:read", "retrieval_stores": "*"}

    responses = [handler(event_with(token("rl-user")), CONTEXT) for _ in range(3)]
    assert [r["statusCode"] for r in responses] == [200, 200, 429]
    assert responses[2]["headers"]["retry-after"] == "40"
    assert json.loads(responses[2]["body"])["error"]["code"] == "rate_limited"
    assert handler(event_with(token("another-user")), CONTEXT)["statusCode"] == 200
    # The counters hold hashes: neither subject appears in the table.
    items = moto.client("dynamodb").scan(TableName=table)["Items"]
    assert len(items) == 2 and not any("user" in item["pk"]["S"] for item in items)


def test_make_api_key_prints_an_entry_with_its_own_rate_limit(client: TestClient, configure: Any) -> None:
    from tests.integration.test_grants_lambda import make_api_key

    run = make_api_key("--name", "rl-cli", "--stores", "*", "--rate-limit", "2/60")
    assert run.returncode == 0, run.stderr
    new_key, entry_line = run.stdout.strip().splitlines()
    assert json.loads(entry_line)["rateLimit"] == {"requests": 2, "windowSeconds": 60}
    settings = configure(API_KEYS=f"[{entry_line}]")
    replace_rate_limiter(build_rate_limiter(settings, ManualClock()))
    assert [search(client, new_key).status_code for _ in range(3)] == [200, 200, 429]
    for wrong in ("fast", "2/0", "-1/60", "2"):
        refused = make_api_key("--name", "x", "--stores", "*", "--rate-limit", wrong)
        assert refused.returncode == 2 and refused.stdout == "" and "rate" in refused.stderr.lower(), wrong
