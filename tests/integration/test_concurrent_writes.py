"""Nothing lost: concurrent upserts never mix versions; a failed write keeps the old one."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from retrieval_core.exceptions import DatabaseUnavailableError, EmbeddingProviderError
from tests.writing import TextDocument, ensure_store, write_documents

CHUNK_SIZE = 60


class TaggedEmbedder:
    """Deterministic 8-dim vectors; optionally fails from its `fail_from`-th call on (a provider outage)."""

    model = "tagged-test"
    dimension = 8

    def __init__(self, fail_from: int | None = None) -> None:
        self.fail_from = fail_from
        self.calls = 0
        self._lock = threading.Lock()

    def embed(self, texts: list[str], kind: str) -> list[list[float]]:
        with self._lock:
            self.calls += 1
            if self.fail_from is not None and self.calls >= self.fail_from:
                raise EmbeddingProviderError("embedding provider failed (test outage)")
        return [[1.0 + (hash(t) >> i & 1) for i in range(self.dimension)] for t in texts]


def version_text(version: int) -> str:
    """A document whose every chunk names its version; version n has n + 2 chunks."""
    return "\n\n".join(f"version {version} part {part} " + "x" * 30 for part in range(version + 2))


def stored(service: Any, store: Any, doc_id: str) -> tuple[int | None, list[tuple[int, str]]]:
    """The document's recorded chunk count and its chunks, read in one snapshot."""
    with service.database.connection() as conn, conn.transaction():
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        row = conn.execute(
            "SELECT chunk_count FROM documents WHERE store_id = %s AND id = %s", (store.id, doc_id)
        ).fetchone()
        chunks = conn.execute(
            "SELECT chunk_index, content FROM chunks WHERE store_id = %s AND document_id = %s"
            " ORDER BY chunk_index",
            (store.id, doc_id),
        ).fetchall()
    return (row[0] if row else None), [(int(i), str(c)) for i, c in chunks]


def versions_in(chunks: list[tuple[int, str]]) -> set[int]:
    return {int(content.split()[1]) for _, content in chunks}


def assert_one_whole_version(count: int | None, chunks: list[tuple[int, str]]) -> int:
    found = versions_in(chunks)
    assert len(found) == 1, f"mixed versions {sorted(found)}: {chunks}"
    (version,) = found
    assert [i for i, _ in chunks] == list(range(version + 2)), chunks  # all its chunks, no stale tail
    assert count == version + 2
    return version


def test_nothing_lost_concurrent_upserts_of_the_same_document_never_mix_versions(service: Any) -> None:
    embedder = TaggedEmbedder()
    store = ensure_store(service, "concurrent-upserts", embedder)
    write_documents(service, store, [TextDocument("doc", version_text(0))], CHUNK_SIZE, 0, embedder)
    writers, rounds = 5, 6
    errors: list[BaseException] = []
    seen_versions: set[int] = set()
    done = threading.Event()

    def write(version: int) -> None:
        try:
            for round_ in range(rounds):
                # Alternate with a neighbour's text so each round really rewrites the document.
                text = version_text(version if round_ % 2 == 0 else (version + 1) % writers + writers)
                write_documents(service, store, [TextDocument("doc", text)], CHUNK_SIZE, 0, embedder)
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            while not done.is_set():
                seen_versions.add(assert_one_whole_version(*stored(service, store, "doc")))
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    threads = [threading.Thread(target=write, args=(v + 1,)) for v in range(writers)]
    for thread in readers + threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    done.set()
    for thread in readers:
        thread.join(timeout=60)
    assert not errors, errors[:3]
    assert len(seen_versions) > 1  # the readers did watch the document change
    assert_one_whole_version(*stored(service, store, "doc"))


def store_version(service: Any, store: Any) -> int:
    with service.database.connection() as conn:
        row = conn.execute("SELECT version FROM stores WHERE id = %s", (store.id,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.usefixtures("poison_trigger")
def test_nothing_lost_an_ingest_failing_inside_its_transaction_leaves_the_previous_version_intact(
    service: Any,
) -> None:
    embedder = TaggedEmbedder()
    store = ensure_store(service, "fails-mid-write", embedder)
    old = [TextDocument("a", version_text(1)), TextDocument("b", version_text(2))]
    write_documents(service, store, old, CHUNK_SIZE, 0, embedder)
    before = {d.id: stored(service, store, d.id) for d in old}
    version_before = store_version(service, store)

    # a's new chunks are written first, then PostgreSQL refuses one of b's: the whole batch rolls back.
    new = [TextDocument("a", version_text(4)), TextDocument("b", version_text(5) + " poison-pill")]
    with pytest.raises(DatabaseUnavailableError, match="writing documents"):
        write_documents(service, store, new, CHUNK_SIZE, 0, embedder)
    assert {d.id: stored(service, store, d.id) for d in old} == before
    assert store_version(service, store) == version_before  # caches were not told of a change


def test_nothing_lost_an_ingest_failing_between_batches_leaves_every_document_whole(service: Any) -> None:
    store = ensure_store(service, "fails-between-batches", TaggedEmbedder())
    ids = ["d0", "d1", "d2", "d3"]
    write_documents(
        service, store, [TextDocument(i, version_text(1)) for i in ids], CHUNK_SIZE, 0, TaggedEmbedder()
    )
    # One document per write; the provider fails on the third.
    failing = TaggedEmbedder(fail_from=3)
    with pytest.raises(EmbeddingProviderError):
        write_documents(
            service,
            store,
            [TextDocument(i, version_text(3)) for i in ids],
            CHUNK_SIZE,
            0,
            failing,
            per_write=1,
        )
    versions = [assert_one_whole_version(*stored(service, store, i)) for i in ids]
    assert versions == [3, 3, 1, 1]  # committed batches are new, the rest keep the old version whole
