"""DocumentService against the real embedded PostgreSQL: writes, metadata, sequences, races, failures."""

from __future__ import annotations

import hashlib
import threading
import uuid
from typing import Any

import pytest

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db import stores as store_sql
from retrieval_core.documents.models import Sequence, SourceInput, StoreDefinition
from retrieval_core.documents.service import DocumentService
from retrieval_core.exceptions import (
    DatabaseUnavailableError,
    DocumentNotFoundError,
    EmbeddingProviderError,
    ForbiddenError,
    InvalidRequestError,
    StoreNotFoundError,
)
from retrieval_core.filters.sql import document_ids_in
from retrieval_core.grants import OPEN_GRANT, Grant
from retrieval_core.parsers.exceptions import EmptyDocumentError, UnsupportedContentTypeError

CHUNK_SIZE = 60


class CountingEmbedder:
    """Deterministic 8-dim vectors from each text's SHA-256; counts provider calls and texts."""

    model = "documents-test"
    dimension = 8

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.calls = 0
        self.texts = 0
        self._lock = threading.Lock()

    def embed(self, texts: list[str], kind: str) -> list[list[float]]:
        with self._lock:
            self.calls += 1
            self.texts += len(texts)
        if self.fail:
            raise EmbeddingProviderError("embedding provider failed (test outage)")
        return [[1.0 + b / 255 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts]


def documents_for(service: Any, embedder: Any = None, chunk_size: int = CHUNK_SIZE) -> DocumentService:
    """A DocumentService on the test database with its own embedder."""
    retrieval = RetrievalService(
        service.database, embedder or CountingEmbedder(), "sample", service.ef_search
    )
    return DocumentService(retrieval, chunk_size, 0)


def new_store(docs: DocumentService, prefix: str = "docs") -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    docs.put_store(name, StoreDefinition())
    return name


def text(source_id: str, body: str, **metadata: Any) -> SourceInput:
    return SourceInput(source_id, body.encode(), "text/plain", metadata=metadata)


def chunks(docs: DocumentService, store: str, doc_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    with docs.retrieval.database.connection() as conn:
        found = store_sql.find_store_named(conn, store)
        assert found is not None
        rows = conn.execute(
            "SELECT chunk_index, content, metadata FROM chunks WHERE store_id = %s AND document_id = %s"
            " ORDER BY chunk_index",
            (found.id, doc_id),
        ).fetchall()
    return [(int(i), str(c), dict(m)) for i, c, m in rows]


def version_of(docs: DocumentService, store: str) -> int:
    with docs.retrieval.database.connection() as conn:
        found = store_sql.find_store_named(conn, store)
    assert found is not None
    return found.version


LONG = "First part of the handbook. " * 4 + "Second part talks about badges. " * 4


def test_write_then_same_bytes_again_is_unchanged_and_embeds_nothing(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder)
    store = new_store(docs)
    first = docs.write_source(store, text("guide.txt", LONG))
    assert first.status == "created" and first.chunk_count > 1
    assert first.content_sha256 == hashlib.sha256(LONG.encode()).hexdigest()
    calls, version = embedder.calls, version_of(docs, store)

    again = docs.write_source(store, text("guide.txt", LONG))
    assert again.status == "unchanged" and again.chunk_count == first.chunk_count
    assert embedder.calls == calls  # nothing re-embedded
    assert version_of(docs, store) == version  # nothing written: cached answers stay valid


def test_metadata_change_alone_updates_every_chunk_without_embedding(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder)
    store = new_store(docs)
    docs.write_source(store, text("policy", LONG, team="facilities"))
    calls, version = embedder.calls, version_of(docs, store)

    result = docs.write_source(store, text("policy", LONG, team="security", year=2026))
    assert result.status == "updated"
    assert embedder.calls == calls
    assert version_of(docs, store) > version
    stored = chunks(docs, store, "policy")
    assert len(stored) == result.chunk_count > 1
    assert all(m["team"] == "security" and m["year"] == 2026 for _, _, m in stored)
    assert all(m["contentType"] == "text/plain" for _, _, m in stored)
    assert docs.get_document(store, "policy").metadata["team"] == "security"


def test_changed_content_is_re_embedded_and_replaces_every_chunk(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder)
    store = new_store(docs)
    docs.write_source(store, text("policy", LONG))
    calls = embedder.calls
    result = docs.write_source(store, text("policy", "Badges are renewed every two years."))
    assert result.status == "updated" and result.chunk_count == 1
    assert embedder.calls == calls + 1
    assert [c for _, c, _ in chunks(docs, store, "policy")] == ["Badges are renewed every two years."]


@pytest.mark.parametrize(
    "doc_id", ["a/b#c", "notes #7", "team/roadmap 2026.txt", "Überblick/größe#3", "日本語/文書#12#0"]
)
def test_any_utf8_id_round_trips_and_chunk_ids_end_in_the_index(service: Any, doc_id: str) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    docs.write_source(store, text(doc_id, LONG))
    assert docs.get_document(store, doc_id).id == doc_id
    vector = docs.retrieval.embedder.embed([LONG], "query")[0]
    _, found = docs.retrieval.search_chunks(store, vector, 50, document_ids_in([doc_id]), grant=OPEN_GRANT)
    assert found and {c.document_id for c in found} == {doc_id}
    for chunk in found:
        # The index is the digits after the last '#': the id splits back unambiguously.
        document_id, index = chunk.chunk_id.rsplit("#", 1)
        assert (document_id, int(index)) == (doc_id, chunk.chunk_index)


@pytest.mark.parametrize(
    ("doc_id", "field"),
    [("x" * 1025, "documentId"), ("é" * 513, "documentId")],
)
def test_ids_over_1024_bytes_are_refused(service: Any, doc_id: str, field: str) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    with pytest.raises(InvalidRequestError) as caught:
        docs.write_source(store, text(doc_id, LONG))
    assert caught.value.details["errors"][0]["field"] == field
    assert docs.list_documents(store)[0] == []


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"documentId": "other"}, "metadata.documentId"),
        ({"chunkIndex": 3}, "metadata.chunkIndex"),
        ({f"k{i}": i for i in range(65)}, "metadata"),
        ({"blob": "x" * 20_000}, "metadata"),
    ],
)
def test_reserved_or_oversized_metadata_is_refused(
    service: Any, metadata: dict[str, Any], field: str
) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    with pytest.raises(InvalidRequestError) as caught:
        docs.write_source(store, text("doc", LONG, **metadata))
    assert caught.value.details["errors"][0]["field"] == field


def test_unknown_store_is_404_unless_create_is_given(service: Any) -> None:
    docs = documents_for(service)
    name = f"created-{uuid.uuid4().hex[:8]}"
    with pytest.raises(StoreNotFoundError):
        docs.write_source(name, text("doc", LONG))
    result = docs.write_source(name, text("doc", LONG), create=StoreDefinition(display_name="Created"))
    assert result.status == "created"
    info = docs.get_store(name)
    assert info.display_name == "Created" and info.document_count == 1


def test_a_failed_first_write_leaves_no_empty_store(service: Any) -> None:
    docs = documents_for(service, CountingEmbedder(fail=True))
    name = f"never-{uuid.uuid4().hex[:8]}"
    with pytest.raises(EmbeddingProviderError):
        docs.write_source(name, text("doc", LONG), create=StoreDefinition())
    with pytest.raises(EmptyDocumentError):
        docs.write_source(name, text("doc", "   \n "), create=StoreDefinition())
    with pytest.raises(StoreNotFoundError):
        docs.get_store(name)


@pytest.mark.usefixtures("poison_trigger")
def test_a_write_failing_in_the_database_leaves_the_previous_state(service: Any) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    docs.write_source(store, text("doc", LONG))
    before, version = chunks(docs, store, "doc"), version_of(docs, store)
    with pytest.raises(DatabaseUnavailableError):
        docs.write_source(store, text("doc", "A new text. poison-pill"))
    assert chunks(docs, store, "doc") == before
    assert version_of(docs, store) == version
    name = f"poisoned-{uuid.uuid4().hex[:8]}"
    with pytest.raises(DatabaseUnavailableError):
        docs.write_source(name, text("doc", "poison-pill"), create=StoreDefinition())
    with pytest.raises(StoreNotFoundError):
        docs.get_store(name)


def test_sequences_apply_only_newer_events(service: Any) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    first = docs.write_source(store, text("k.txt", "Version one."), sequence=Sequence("k.txt", "00A1"))
    assert first.status == "created" and not first.stale
    # Shorter hex is left-padded: "B" is 000B, older than 00A1.
    stale = docs.write_source(store, text("k.txt", "Older event."), sequence=Sequence("k.txt", "B"))
    assert stale.stale and stale.documents == []
    same = docs.write_source(store, text("k.txt", "Repeated event."), sequence=Sequence("k.txt", "00a1"))
    assert same.stale
    assert [c for _, c, _ in chunks(docs, store, "k.txt")] == ["Version one."]

    assert docs.delete_source(store, "k.txt", sequence=Sequence("k.txt", "0A0")) == []  # older delete
    assert docs.delete_source(store, "k.txt", sequence=Sequence("k.txt", "00B0")) == ["k.txt"]
    # An event older than the delete does not bring the object back.
    late = docs.write_source(store, text("k.txt", "Late."), sequence=Sequence("k.txt", "00A5"))
    assert late.stale
    with pytest.raises(DocumentNotFoundError):
        docs.get_document(store, "k.txt")
    again = docs.write_source(store, text("k.txt", "Uploaded again."), sequence=Sequence("k.txt", "0100"))
    assert again.status == "created"


def test_sidecar_metadata_applies_before_and_after_the_object_without_embedding(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder)
    store = new_store(docs)
    # The sidecar arrives first: kept for the object.
    assert (
        docs.put_source_metadata(
            store, "report.txt", {"team": "ops"}, Sequence("report.txt.metadata.json", "10")
        )
        == 0
    )
    docs.write_source(store, text("report.txt", LONG, year=2026))
    assert {m["team"] for _, _, m in chunks(docs, store, "report.txt")} == {"ops"}
    calls, version = embedder.calls, version_of(docs, store)

    changed = docs.put_source_metadata(
        store, "report.txt", {"team": "platform"}, Sequence("report.txt.metadata.json", "20")
    )
    assert changed == 1 and embedder.calls == calls and version_of(docs, store) > version
    stored = chunks(docs, store, "report.txt")
    assert {(m["team"], m["year"], m["contentType"]) for _, _, m in stored} == {
        ("platform", 2026, "text/plain")
    }
    # The writer's own keys win over the sidecar's, before and after a sidecar change.
    assert docs.put_source_metadata(store, "report.txt", {"team": "platform", "year": 1999}) == 0
    assert {m["year"] for _, _, m in chunks(docs, store, "report.txt")} == {2026}
    assert docs.put_source_metadata(store, "report.txt", {"team": "platform"}) == 0
    # An older sidecar event changes nothing; removing the sidecar removes its keys only.
    assert (
        docs.put_source_metadata(
            store, "report.txt", {"team": "old"}, Sequence("report.txt.metadata.json", "15")
        )
        == 0
    )
    assert (
        docs.put_source_metadata(store, "report.txt", None, Sequence("report.txt.metadata.json", "30")) == 1
    )
    stored = chunks(docs, store, "report.txt")
    assert all("team" not in m and m["year"] == 2026 for _, _, m in stored)
    assert embedder.calls == calls
    # A rewrite of the same bytes after that is unchanged.
    assert docs.write_source(store, text("report.txt", LONG, year=2026)).status == "unchanged"


def test_write_sources_batches_embedding_and_reports_bad_sources_without_stopping(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder, chunk_size=1000)
    store = new_store(docs)
    sources = [text(f"note-{i:03}", f"Note number {i} about the office.") for i in range(300)]
    sources.insert(5, SourceInput("empty.txt", b"  ", "text/plain"))
    sources.insert(9, SourceInput("image.png", b"\x89PNG", "image/png"))
    results = list(docs.write_sources(store, sources))
    assert len(results) == 302
    assert isinstance(results[5], EmptyDocumentError)
    assert isinstance(results[9], UnsupportedContentTypeError)
    written = [r for r in results if not isinstance(r, Exception)]
    assert [r.source_id for r in written] == [f"note-{i:03}" for i in range(300)]
    assert {r.status for r in written} == {"created"}
    assert embedder.texts == 300 and embedder.calls <= 3  # 256 texts per provider call, across sources
    assert docs.get_store(store).document_count == 300
    calls = embedder.calls
    assert {r.status for r in docs.write_sources(store, sources) if not isinstance(r, Exception)} == {
        "unchanged"
    }
    assert embedder.calls == calls


def test_source_hashes_flag_sources_made_under_other_settings(service: Any) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    docs.write_source(store, text("a.txt", "Alpha."))
    docs.write_source(store, text("b.txt", "Beta."))
    assert docs.source_hashes(store) == {
        "a.txt": hashlib.sha256(b"Alpha.").hexdigest(),
        "b.txt": hashlib.sha256(b"Beta.").hexdigest(),
    }
    rechunked = DocumentService(docs.retrieval, CHUNK_SIZE + 10, 0)
    assert rechunked.source_hashes(store) == {"a.txt": "", "b.txt": ""}


def test_list_pages_in_id_order_with_prefix_and_cursor(service: Any) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    ids = ["team/b", "team/a", "team/c#1", "other", "team/Z"]
    for doc_id in ids:
        docs.write_source(store, text(doc_id, f"Text of {doc_id}."))
    page, cursor = docs.list_documents(store, prefix="team/", limit=2)
    assert [d.id for d in page] == ["team/Z", "team/a"] and cursor is not None
    page, cursor = docs.list_documents(store, prefix="team/", limit=2, cursor=cursor)
    assert [d.id for d in page] == ["team/b", "team/c#1"] and cursor is None
    with pytest.raises(InvalidRequestError):
        docs.list_documents(store, cursor="!!not-a-cursor")
    info = docs.get_document(store, "team/c#1")
    assert (info.source, info.content_type, info.chunk_count) == ("team/c#1", "text/plain", 1)
    assert info.content_sha256 == hashlib.sha256(b"Text of team/c#1.").hexdigest()


def test_grants_scope_first_then_store(service: Any) -> None:
    docs = documents_for(service)
    store = new_store(docs)
    reader = Grant("reader", frozenset({"read"}), frozenset({store}))
    other = Grant("other", frozenset({"read", "write"}), frozenset({"elsewhere"}))
    with pytest.raises(ForbiddenError):
        docs.write_source(store, text("doc", LONG), grant=reader)
    with pytest.raises(StoreNotFoundError):
        docs.write_source(store, text("doc", LONG), grant=other)
    with pytest.raises(ForbiddenError):
        docs.put_store(store, StoreDefinition(), grant=other)
    assert store not in {s.name for s in docs.every_store(grant=other)}
    assert [s.name for s in docs.list_stores(limit=1000, grant=reader)[0]] == [store]


def version_text(version: int) -> str:
    """A document whose every chunk names its version; version n has n + 2 chunks."""
    return "\n\n".join(f"version {version} part {part} " + "x" * 30 for part in range(version + 2))


def test_concurrent_writers_and_a_searching_reader_never_see_a_mix(service: Any) -> None:
    embedder = CountingEmbedder()
    docs = documents_for(service, embedder)
    store = new_store(docs, "race")
    query = embedder.embed(["version"], "query")[0]
    statuses: list[str] = []
    errors: list[BaseException] = []
    seen: set[int] = set()
    done = threading.Event()
    lock = threading.Lock()

    def write(offset: int) -> None:
        try:
            for round_ in range(8):
                # Two texts alternate, so a write often finds the other writer's text already there.
                result = docs.write_source(store, text("doc", version_text((round_ + offset) % 3)))
                with lock:
                    statuses.append(result.status)
        except BaseException as exc:
            errors.append(exc)

    def read() -> None:
        try:
            while not done.is_set():
                _, found = docs.retrieval.search_chunks(
                    store, query, 50, document_ids_in(["doc"]), grant=OPEN_GRANT
                )
                if not found:
                    continue
                versions = {int(c.content.split()[1]) for c in found}
                assert len(versions) == 1, f"mixed versions {versions}"
                (version,) = versions
                assert sorted(c.chunk_index for c in found) == list(range(version + 2)), (
                    "duplicate or stale chunks"
                )
                seen.add(version)
        except BaseException as exc:
            errors.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    writers = [threading.Thread(target=write, args=(offset,)) for offset in range(2)]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=300)
    done.set()
    for thread in readers:
        thread.join(timeout=60)
    assert not errors, errors[:3]
    assert statuses.count("created") == 1  # two writers, one document: it was created once
    assert len(seen) > 1
    # The document row and its chunks come from the same write: no update of one was lost to the other.
    info = docs.get_document(store, "doc")
    stored = chunks(docs, store, "doc")
    version = int(stored[0][1].split()[1])
    assert info.content_sha256 == hashlib.sha256(version_text(version).encode()).hexdigest()
    assert info.chunk_count == len(stored) == version + 2


def test_a_row_source_is_one_document_per_record_and_loses_records_it_no_longer_holds(service: Any) -> None:
    from tests.files import csv_bytes

    embedder = CountingEmbedder()
    docs = documents_for(service, embedder, chunk_size=1000)
    store = new_store(docs)
    rows = [
        {"id": "q1", "title": "Install", "text": "Use apt on Linux.", "year": "2024"},
        {"id": "", "title": "", "text": "A record without an id.", "year": ""},
        {"id": "q3", "title": "", "text": "Third answer.", "year": ""},
    ]
    first = docs.write_source(store, SourceInput("faq.csv", csv_bytes(rows), "text/csv", "faq.csv"))
    assert [(d.document_id, d.status) for d in first.documents] == [
        ("q1", "created"),
        ("faq.csv#2", "created"),
        ("q3", "created"),
    ]
    assert first.content_type == "text/csv" and first.status == "created"
    assert {docs.get_document(store, i).source for i in ("q1", "faq.csv#2", "q3")} == {"faq.csv"}
    ((_, _, q1),) = chunks(docs, store, "q1")
    assert (q1["year"], q1["title"], q1["fileName"], q1["contentType"]) == (
        2024,
        "Install",
        "faq.csv",
        "text/csv",
    )
    texts = embedder.texts

    # q1 unchanged, q3 revised, the id-less record gone: removed in the same transaction.
    revised = [rows[0], {"id": "q3", "title": "", "text": "Third answer, revised.", "year": ""}]
    data = csv_bytes(revised)
    second = docs.write_source(store, SourceInput("faq.csv", data, "text/csv", "faq.csv"))
    assert [(d.document_id, d.status) for d in second.documents] == [("q1", "unchanged"), ("q3", "updated")]
    assert second.removed == ["faq.csv#2"] and second.status == "updated"
    assert embedder.texts == texts + 1  # only the revised record was embedded
    assert [d.id for d in docs.list_documents(store)[0]] == ["q1", "q3"]
    assert docs.source_hashes(store) == {"faq.csv": hashlib.sha256(data).hexdigest()}
    assert sorted(docs.delete_source(store, "faq.csv")) == ["q1", "q3"]
    assert docs.list_documents(store)[0] == []


class InterruptingEmbedder(CountingEmbedder):
    """Runs `meanwhile` once, during its first provider call: another writer acting mid-write."""

    def __init__(self, meanwhile: Any) -> None:
        super().__init__()
        self.meanwhile = meanwhile

    def embed(self, texts: list[str], kind: str) -> list[list[float]]:
        meanwhile, self.meanwhile = self.meanwhile, None
        if meanwhile is not None:
            meanwhile()
        return super().embed(texts, kind)


def test_a_document_changed_by_another_writer_during_embedding_is_not_lost(service: Any) -> None:
    other = documents_for(service)
    store = new_store(other)
    other.write_source(store, text("kept", "The kept text, version one."))

    def rewrite_kept() -> None:  # runs while the first writer embeds, holding no connection
        other.write_source(store, text("kept", "Another writer's text."))

    embedder = InterruptingEmbedder(rewrite_kept)
    docs = documents_for(service, embedder)
    # Under a file name, so that it is parsed: the same source as stored is answered before any parse.
    kept = SourceInput("kept", b"The kept text, version one.", "text/plain", name="kept.txt")
    results = list(docs.write_sources(store, [text("fresh", "A new document."), kept]))
    # At the pre-read "kept" was unchanged; under the lock it no longer was, so it was embedded and written.
    assert [r.status for r in results if not isinstance(r, Exception)] == ["created", "updated"]
    assert embedder.calls == 2
    assert [c for _, c, _ in chunks(docs, store, "kept")] == ["The kept text, version one."]
    info = docs.get_document(store, "kept")
    assert info.content_sha256 == hashlib.sha256(b"The kept text, version one.").hexdigest()


def test_writes_deletes_and_sidecars_of_one_row_source_racing_never_fail_or_tear(service: Any) -> None:
    from tests.files import jsonl_bytes

    docs = documents_for(service)
    store = new_store(docs, "row-race")
    errors: list[BaseException] = []

    def records(round_: int) -> bytes:
        # Each round holds a different subset of records, so writes also remove records.
        return jsonl_bytes(
            [{"_id": f"r{i}", "text": f"Record {i}, round {round_}."} for i in range(round_ % 4, 8)]
        )

    def run(action: Any) -> None:
        try:
            for round_ in range(12):
                action(round_)
        except BaseException as exc:
            errors.append(exc)

    actions = [
        lambda r: docs.write_source(store, SourceInput("rows.jsonl", records(r), None, "rows.jsonl")),
        lambda r: docs.write_source(store, SourceInput("rows.jsonl", records(r + 1), None, "rows.jsonl")),
        lambda r: docs.delete_source(store, "rows.jsonl") if r % 3 == 0 else None,
        lambda r: docs.put_source_metadata(store, "rows.jsonl", {"round": r}),
    ]
    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors[:3]
    for info in docs.list_documents(store, limit=1000)[0]:
        stored = chunks(docs, store, info.id)
        assert [i for i, _, _ in stored] == list(range(info.chunk_count))
        assert len({c for _, c, _ in stored}) == 1 and info.source == "rows.jsonl"
