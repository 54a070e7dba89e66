from __future__ import annotations

import json
import zlib

import pytest

from retrieval_core.cache.backends import MemoryBackend
from retrieval_core.cache.cache_keys import search_key, store_name_key, store_version_key
from retrieval_core.cache.json_cache import JsonCache
from retrieval_core.exceptions import CacheUnavailableError
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
    assert len({store_name_key("pgvector", "s"), store_version_key("pgvector", "s"), key()}) == 3


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
    assert backend.add("c", b"x", ttl_s=5) is False
    assert backend.add("a", b"new", ttl_s=5) is True
    assert backend.get("a") == b"new"


class BrokenBackend:
    def get(self, key: str) -> bytes | None:
        raise CacheUnavailableError("DynamoDB GetItem failed: ThrottlingException")

    def put(self, key: str, value: bytes, ttl_s: float) -> None:
        raise CacheUnavailableError("DynamoDB PutItem failed: ThrottlingException")

    def add(self, key: str, value: bytes, ttl_s: float) -> bool:
        raise CacheUnavailableError("DynamoDB PutItem failed: ThrottlingException")

    def put_newer(self, key: str, value: bytes, order: int, ttl_s: float) -> bool:
        raise CacheUnavailableError("DynamoDB PutItem failed: ThrottlingException")

    def delete(self, key: str) -> None:
        raise CacheUnavailableError("DynamoDB DeleteItem failed: ThrottlingException")


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
    cache.add("k", {"a": 1}, ttl_s=60)
    cache.delete("k")
    assert metrics.counters["CacheError"] - before == 4
    assert "serving uncached" in caplog.text


def test_a_version_published_by_another_process_is_never_missed() -> None:
    from retrieval_core.cache.search_cache import SearchCache, StoreRef

    shared = MemoryBackend(max_items=100)  # stands in for the DynamoDB table both processes use

    def process() -> SearchCache:
        return SearchCache(
            JsonCache(shared, "search"), JsonCache(shared, "store"), shared=True, default_ttl_s=300
        )

    reader, writer = process(), process()

    def key_of(ref: StoreRef) -> str:
        return f"answer@{ref.version}"

    assert reader.find("pgvector", "docs", key_of) == (None, None)  # unknown: the caller asks PostgreSQL
    reader.remember_store("pgvector", "docs", StoreRef("docs", 1))
    reader.put_answer(key_of(StoreRef("docs", 1)), {"answer": "old"}, 60)
    assert reader.find("pgvector", "docs", key_of) == (StoreRef("docs", 1), {"answer": "old"})

    writer.publish_version("pgvector", "docs", 2)
    # The reader's own memory says version 1, but the shared version item wins.
    assert reader.find("pgvector", "docs", key_of) == (StoreRef("docs", 2), None)
    reader.put_answer(key_of(StoreRef("docs", 2)), {"answer": "new"}, 60)
    assert reader.find("pgvector", "docs", key_of) == (StoreRef("docs", 2), {"answer": "new"})


def test_a_reader_never_overwrites_a_newer_published_version() -> None:
    from retrieval_core.cache.search_cache import SearchCache, StoreRef

    shared = MemoryBackend(max_items=100)
    cache = SearchCache(
        JsonCache(shared, "search"), JsonCache(shared, "store"), shared=True, default_ttl_s=300
    )
    cache.publish_version("pgvector", "docs", 7)  # a writer committed version 7
    cache.remember_store("pgvector", "docs", StoreRef("docs", 6))  # a slow reader read 6 before that commit
    assert cache.find("pgvector", "docs", lambda ref: f"a@{ref.version}")[0] == StoreRef("docs", 7)


def test_versions_published_out_of_order_leave_the_newest_current() -> None:
    from retrieval_core.cache.search_cache import SearchCache, StoreRef

    shared = MemoryBackend(max_items=100)
    cache = SearchCache(
        JsonCache(shared, "search"), JsonCache(shared, "store"), shared=True, default_ttl_s=300
    )
    cache.remember_store("pgvector", "docs", StoreRef("docs", 5))
    # Two writers commit versions 8 and 9; the second to commit publishes first.
    cache.publish_version("pgvector", "docs", 9)
    cache.publish_version("pgvector", "docs", 8)
    assert cache.find("pgvector", "docs", lambda ref: f"a@{ref.version}")[0] == StoreRef("docs", 9)


def test_ttl_rules() -> None:
    from retrieval_core.cache.search_cache import SearchCache

    cache = SearchCache(JsonCache(MemoryBackend(1), "s"), JsonCache(MemoryBackend(1), "t"), False, 300)
    assert cache.ttl_for(None) == 300
    assert cache.ttl_for(0) is None
    assert cache.ttl_for(1500) == 1.5
    assert cache.ttl_for(90_000_000) == 86_400


def test_a_dropped_store_is_no_longer_vouched_for() -> None:
    from retrieval_core.cache.search_cache import SearchCache, StoreRef

    shared = MemoryBackend(max_items=100)
    cache = SearchCache(
        JsonCache(shared, "search"), JsonCache(shared, "store"), shared=True, default_ttl_s=300
    )
    cache.remember_store("pgvector", "docs", StoreRef("docs", 5))
    cache.put_answer("a@5", {"answer": "from the dropped store"}, 60)
    assert cache.find("pgvector", "docs", lambda ref: f"a@{ref.version}") == (
        StoreRef("docs", 5),
        {"answer": "from the dropped store"},
    )
    cache.forget_version("pgvector", "docs")
    assert cache.find("pgvector", "docs", lambda ref: f"a@{ref.version}") == (None, None)
