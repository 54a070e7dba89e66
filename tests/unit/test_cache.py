from __future__ import annotations

import json
import zlib

import pytest

from retrieval_core.cache.backends import MemoryBackend
from retrieval_core.cache.cache_keys import search_key, store_name_key
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.cache.search_cache import SearchCache, StoreRef
from retrieval_core.exceptions import CacheUnavailableError, StoreNotFoundError
from retrieval_core.observability import metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


BASE = {"query": "q", "grade": 0.5, "similarity_top_k": 5, "doc_ids": None, "metadata_filter": None}


def key(request: dict[str, object] = BASE, **overrides: object) -> str:
    args: dict[str, object] = {
        "backend": "pgvector",
        "store": "s",
        "store_version": 1,
        "operation": "retrieve",
        "request": request,
        "context": {"embeddingModel": "m"},
    }
    args.update(overrides)
    return search_key(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "change",
    [
        {"query": "q2"},
        {"grade": 0.6},
        {"similarity_top_k": 6},
        {"doc_ids": ["a"]},
        {"metadata_filter": {"k": "v"}},
        {"system_instruction": "Be brief."},
        {"max_output_tokens": 512},
        {"engine_name": "default"},
        {"rerank": {"enabled": True}},
        {"vector_weight": 0.3},
    ],
)
def test_every_option_that_changes_the_answer_changes_the_key(change: dict[str, object]) -> None:
    assert key({**BASE, **change}) != key()


@pytest.mark.parametrize(
    "override",
    [
        {"backend": "gemini"},
        {"store": "t"},
        {"store_version": 2},
        {"operation": "similarity"},
        {"context": {"embeddingModel": "other"}},
    ],
)
def test_backend_store_version_and_model_change_the_key(override: dict[str, object]) -> None:
    assert key(**override) != key()


def test_cache_controls_and_dict_order_do_not_change_the_key() -> None:
    assert key({**BASE, "cache_ttl_ms": 1}) == key()
    assert key(dict(reversed(list(BASE.items())))) == key()


def test_key_kinds_do_not_collide() -> None:
    assert len({store_name_key("pgvector", "s"), key()}) == 2


def test_memory_backend_expires_and_evicts_least_recently_used() -> None:
    clock = Clock()
    backend = MemoryBackend(max_items=2, clock=clock)
    backend.put("a", b"1", ttl_s=10)
    backend.put("b", b"2", ttl_s=100)
    assert backend.get("a") == b"1"  # a is now the most recently used
    backend.put("c", b"3", ttl_s=100)
    assert backend.get("b") is None and backend.get("a") == b"1" and backend.get("c") == b"3"
    clock.now += 10
    assert backend.get("a") is None  # expired exactly at its TTL
    backend.put("a", b"new", ttl_s=5)
    assert backend.get("a") == b"new"


class BrokenBackend:
    def get(self, key: str) -> bytes | None:
        raise CacheUnavailableError("DynamoDB GetItem failed: ThrottlingException")

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        raise CacheUnavailableError("DynamoDB PutItem failed: ThrottlingException")


def test_json_cache_round_trips_compressed_values() -> None:
    backend = MemoryBackend(max_items=10)
    cache = JsonCache(backend, "search")
    value = {"results": [{"content": "é" * 1000, "score": 0.5}]}
    cache.put("k", value, ttl_s=60)
    assert cache.get("k") == value
    stored = backend.get("k")
    assert stored is not None and len(stored) < 200  # compressed
    assert json.loads(zlib.decompress(stored)) == value


def test_json_cache_fails_open_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    cache = JsonCache(BrokenBackend(), "search")
    before = metrics.counters["CacheError"]
    assert cache.get("k") is None
    cache.put("k", {"a": 1}, ttl_s=60)
    assert metrics.counters["CacheError"] - before == 2
    assert "serving uncached" in caplog.text


class Versions:
    """Stands in for PostgreSQL: the store's current version, and how often it was read."""

    def __init__(self, version: int) -> None:
        self.version = version
        self.reads = 0

    def __call__(self) -> StoreRef:
        self.reads += 1
        return StoreRef("docs", self.version)


def answer_key(ref: StoreRef) -> str:
    return f"answer@{ref.version}"


def shared_cache(backend: MemoryBackend) -> SearchCache:
    return SearchCache(
        JsonCache(backend, "search"), JsonCache(backend, "store"), shared=True, default_ttl_s=300
    )


def test_every_lookup_reads_the_version_so_another_process_s_write_is_never_missed() -> None:
    table = MemoryBackend(max_items=100)  # stands in for the DynamoDB table both processes use
    reader = shared_cache(table)
    versions = Versions(1)
    assert reader.lookup("pgvector", "docs", versions, answer_key) == (StoreRef("docs", 1), None)
    reader.put_answer(answer_key(StoreRef("docs", 1)), {"answer": "old"}, 60)
    assert reader.lookup("pgvector", "docs", versions, answer_key) == (StoreRef("docs", 1), {"answer": "old"})

    versions.version = 2  # another process committed a write; it told the cache nothing
    assert reader.lookup("pgvector", "docs", versions, answer_key) == (StoreRef("docs", 2), None)
    reader.put_answer(answer_key(StoreRef("docs", 2)), {"answer": "new"}, 60)
    assert reader.lookup("pgvector", "docs", versions, answer_key) == (StoreRef("docs", 2), {"answer": "new"})
    assert versions.reads == 4


def test_a_failing_cache_still_reads_the_version_and_serves_nothing_cached() -> None:
    broken = SearchCache(JsonCache(BrokenBackend(), "search"), JsonCache(BrokenBackend(), "store"), True, 300)
    versions = Versions(3)
    for _ in range(2):  # the second with a remembered guess, read in parallel
        assert broken.lookup("pgvector", "docs", versions, answer_key) == (StoreRef("docs", 3), None)
    assert versions.reads == 2


def test_an_unknown_store_is_the_version_reader_s_error() -> None:
    cache = shared_cache(MemoryBackend(max_items=10))

    def unknown() -> StoreRef:
        raise StoreNotFoundError("docs")

    with pytest.raises(StoreNotFoundError):
        cache.lookup("pgvector", "docs", unknown, answer_key)


def test_ttl_rules() -> None:
    cache = SearchCache(JsonCache(MemoryBackend(1), "s"), JsonCache(MemoryBackend(1), "t"), False, 300)
    assert cache.ttl_for(None) == 300
    assert cache.ttl_for(0) is None
    assert cache.ttl_for(1500) == 1.5
    assert cache.ttl_for(90_000_000) == 86_400
