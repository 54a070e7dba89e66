"""The DynamoDB cache backend through real boto3 against moto_server."""

from __future__ import annotations

import os

import pytest

from retrieval_core.cache.backends import DYNAMODB_MAX_VALUE_BYTES, DynamoDBBackend, ValueTooLargeError
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.exceptions import CacheUnavailableError
from retrieval_core.observability import metrics
from tests.fakes.clock import ManualClock
from tests.servers import MotoServer


def test_hit_miss_and_expiry_with_a_controlled_clock(moto: MotoServer, table: str) -> None:
    clock = ManualClock()
    backend = DynamoDBBackend(table, lambda: moto.client("dynamodb"), clock=clock)
    assert backend.get("k") is None
    backend.put("k", b"value", ttl_s=300)
    assert backend.get("k") == b"value"
    item = moto.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "k"}})["Item"]
    assert int(item["expiresAt"]["N"]) == int(clock.now) + 301  # epoch seconds, the TTL attribute
    clock.now += 301
    # moto, like DynamoDB, may still hold the expired item: the read must ignore it.
    assert "Item" in moto.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "k"}})
    assert backend.get("k") is None


def test_oversized_value_is_not_cached_and_is_counted(moto: MotoServer, table: str) -> None:
    backend = DynamoDBBackend(table, lambda: moto.client("dynamodb"))
    with pytest.raises(ValueTooLargeError):
        backend.put("big", b"x" * (DYNAMODB_MAX_VALUE_BYTES + 1), ttl_s=60)
    cache = JsonCache(backend, "search")
    before = metrics.counters["CacheValueTooLarge"]
    incompressible = {"blob": os.urandom(600_000).hex()}  # random hex compresses only about 2:1
    cache.put("big", incompressible, ttl_s=60)
    assert metrics.counters["CacheValueTooLarge"] == before + 1
    assert cache.get("big") is None


def test_unreachable_dynamodb_raises_cache_unavailable(table: str) -> None:
    dead = MotoServer()  # never started: nothing listens on its port
    backend = DynamoDBBackend(table, lambda: dead.client("dynamodb"))
    with pytest.raises(CacheUnavailableError, match="GetItem failed"):
        backend.get("k")


def test_missing_table_is_a_cache_error_naming_the_code(moto: MotoServer) -> None:
    backend = DynamoDBBackend("no-such-table", lambda: moto.client("dynamodb"))
    with pytest.raises(CacheUnavailableError, match="ResourceNotFoundException"):
        backend.put("k", b"v", ttl_s=5)


def test_after_a_failure_the_cache_is_left_alone_for_a_while_then_asked_again(
    moto: MotoServer, table: str
) -> None:
    # A request makes several cache calls: during an outage each must not pay the network again.
    clock = ManualClock()
    calls = []

    def client():  # type: ignore[no-untyped-def]
        real = moto.client("dynamodb")
        real.meta.events.register(
            "before-call.dynamodb.*", lambda **kwargs: calls.append(kwargs["model"].name)
        )
        return real

    missing = DynamoDBBackend("no-such-table", client, clock=clock)
    with pytest.raises(CacheUnavailableError, match="ResourceNotFoundException"):
        missing.get("k")
    for _ in range(3):
        with pytest.raises(CacheUnavailableError, match="skipped: the cache failed less than 10 s ago"):
            missing.put("k", b"v", ttl_s=5)
    assert calls == ["GetItem"]
    clock.now += 10
    with pytest.raises(CacheUnavailableError, match="ResourceNotFoundException"):
        missing.get("k")
    assert calls == ["GetItem", "GetItem"]
