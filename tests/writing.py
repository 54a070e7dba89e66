"""Fill test stores through the production write path: `DocumentService`, as the HTTP documents route,
the CLI and S3 sync do.

Each document given as text becomes its own source: a one-record JSON Lines file whose id, title, text
and metadata are the document's (the record's text is one block, so it is chunked as a whole). Writing
a document again replaces it; documents not named are left alone. The write path takes its embedder
from the retrieval service and its chunk size from the DocumentService, so a test that needs another
embedder or chunk size gets a DocumentService built with them, over the same database and cache.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from retrieval_core.backends.pgvector.service import RetrievalService
from retrieval_core.db.stores import Store
from retrieval_core.documents.models import SourceInput, StoreDefinition
from retrieval_core.documents.service import DocumentService
from retrieval_core.embeddings.base import Embedder, EmbeddingKind
from retrieval_core.exceptions import RetrievalError
from retrieval_core.parsers.detect import JSONL
from retrieval_core.parsers.exceptions import EmptyDocumentError


@dataclass(frozen=True, slots=True)
class TextDocument:
    """A document given as text: the id it is stored under, its text, title and metadata."""

    id: str
    text: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

    def source(self) -> SourceInput:
        """The document as the one record of a JSON Lines source named by its id."""
        record = {"_id": self.id, "title": self.title, "text": self.text, "metadata": self.metadata}
        return SourceInput(self.id, json.dumps(record).encode(), content_type=JSONL)


@dataclass(frozen=True, slots=True)
class GivenVectors:
    """An embedder that returns the vector given for each text: for tests that place chunks exactly
    (synthetic vectors) while writing through the production writer."""

    model: str
    dimension: int
    vectors: dict[str, list[float]]

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        missing = [text for text in texts if text not in self.vectors]
        assert not missing, f"no vector given for {missing[0]!r}"
        return [self.vectors[text] for text in texts]


class HashingEmbedder:
    """8 numbers per text from its hash: for tests of loads and races, where meaning does not matter and
    the local model would spend seconds on thousands of texts."""

    model = "hashing-test"
    dimension = 8

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        return [[0.1 + ((hash(t) >> i) & 1) for i in range(self.dimension)] for t in texts]


@contextmanager
def serving_with(service: RetrievalService, embedder: Embedder) -> Iterator[RetrievalService]:
    """The process-wide service (HTTP app, CLI, S3 handler) swapped for one over the same database that
    embeds with `embedder`; the shared one is put back after."""
    from retrieval_core import container

    retrieval = copy.copy(service)
    retrieval.embedder = embedder
    shared = container.replace_service(retrieval)
    try:
        yield retrieval
    finally:
        container.replace_service(shared)


@dataclass(slots=True)
class WriteReport:
    """What a write did, counted per document."""

    documents_written: int = 0
    documents_unchanged: int = 0
    documents_empty: int = 0
    chunks_written: int = 0


def document_service(
    service: RetrievalService,
    embedder: Embedder | None = None,
    chunk_size: int = 1000,
    chunk_overlap: int = 150,
) -> DocumentService:
    """The write side over `service`, embedding with `embedder` (default: the service's own)."""
    retrieval = service
    if embedder is not None and embedder is not service.embedder:
        # The same database, cache and settings; only the embedder differs.
        retrieval = copy.copy(service)
        retrieval.embedder = embedder
    return DocumentService(retrieval, chunk_size, chunk_overlap)


def ensure_store(
    service: RetrievalService,
    name: str,
    embedder: Embedder | None = None,
    display_name: str | None = None,
) -> Store:
    """The store `name`, created for `embedder` if missing (as the CLI and S3 sync create it).

    With `display_name`, the store is put as PUT /api/v1/stores/{store} puts it.
    """
    documents = document_service(service, embedder)
    if display_name is None:
        return documents.ensure_store(name)
    documents.put_store(name, StoreDefinition(display_name=display_name))
    return documents.retrieval.get_store(name)


def write_documents(
    service: RetrievalService,
    store: Store | str,
    documents: Iterable[TextDocument],
    chunk_size: int,
    chunk_overlap: int,
    embedder: Embedder | None = None,
    per_write: int | None = None,
) -> WriteReport:
    """Write `documents` into `store` through `DocumentService.write_sources`; what happened to them.

    Sources are embedded and committed in the groups `write_sources` makes; `per_write` caps how many
    documents go into one call (and so one transaction). A document with no text is counted as empty.
    """
    name = store if isinstance(store, str) else store.name
    writer = document_service(service, embedder, chunk_size, chunk_overlap)
    report = WriteReport()
    for batch in _batches(documents, per_write):
        for result in writer.write_sources(name, (d.source() for d in batch)):
            if isinstance(result, EmptyDocumentError):
                report.documents_empty += 1
            elif isinstance(result, RetrievalError):
                raise result
            else:
                for document in result.documents:
                    if document.status == "unchanged":
                        report.documents_unchanged += 1
                    else:
                        report.documents_written += 1
                        report.chunks_written += document.chunk_count
    return report


def _batches(documents: Iterable[TextDocument], size: int | None) -> Iterator[list[TextDocument]]:
    batch: list[TextDocument] = []
    for document in documents:
        batch.append(document)
        if size is not None and len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


# The documents API over HTTP, for the tests that write through it.
STORES = "/api/v1/stores"


def doc_url(store: str, document_id: str) -> str:
    """The URL of one document of `store`, its id percent-encoded whole (a `/` in it included)."""
    from urllib.parse import quote

    return f"{STORES}/{store}/documents/{quote(document_id, safe='')}"
