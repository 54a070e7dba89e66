"""Values the write side takes and gives. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from retrieval_core.backends.attached.definition import SourceRequest
from retrieval_core.db.storage import Storage
from retrieval_core.documents.chunking import Chunking
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, TableOptions
from retrieval_core.schemas.common import WriteStatus


@dataclass(frozen=True, slots=True)
class Actor:
    """Who makes a change, as the audit trail records it (docs/security.md, "Audit trail").

    `credential`: the API key entry's name, `jwt:<subject>`, `s3:<principal>` or `cli:<user>`, never a key.
    `request_id`: the HTTP request's x-request-id, the S3 request that made the event, a command's run.
    """

    credential: str
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class StoreDefinition:
    """What PUT /api/v1/stores/{store} sets.

    `storage` cannot change once the store exists (409); `display_name` can.
    `allowed_metadata_keys` None: every key the service allows (ALLOWED_METADATA_KEYS); otherwise
    intersected with it.
    `text_search`: the PostgreSQL text search configuration of the keyword index (`english`, `simple`,
    `german`, ...), fixed once the store exists (409); None: `english` for a new store, the store's own
    for an existing one.
    """

    display_name: str | None = None
    storage: Storage = "vector"
    allowed_metadata_keys: tuple[str, ...] | None = None
    text_search: str | None = None
    # An attached store: the existing table it reads (docs/existing-tables.md); None: its own documents.
    source: SourceRequest | None = None
    # The store's own chunking; None: unchanged for an existing store, the deployment's for a new one.
    chunking: Chunking | None = None


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """A store as GET /api/v1/stores shows it."""

    name: str
    display_name: str
    storage: Storage
    embedding_model: str
    dimension: int
    allowed_metadata_keys: tuple[str, ...] | None
    document_count: int
    chunk_count: int
    version: int
    text_search: str = "english"
    # An attached store: its source as shown (camelCase) and what it supports; None for our own stores.
    source: dict[str, Any] | None = None
    features: list[dict[str, Any]] | None = None
    # The store's own chunking; None: it follows the deployment's CHUNK_SIZE and CHUNK_OVERLAP (fixed).
    chunking: Chunking | None = None


@dataclass(frozen=True, slots=True)
class SourceInput:
    """A file or API payload to write into a store as the source `source_id`.

    Single-document formats (PDF, HTML, DOCX, Markdown, text) give one document whose id is
    `source_id`. Row formats (CSV, JSONL) give one document per record: its id is the record's id
    column, else `{source_id}#{record_number}`; every one of them has `source_id` as its source.
    """

    source_id: str
    data: bytes
    content_type: str | None = None  # declared; None: decided from `name` and the bytes
    name: str | None = None  # file name: its suffix helps detection; becomes `fileName` metadata
    metadata: dict[str, Any] = field(default_factory=dict)  # given by the caller or a sidecar
    # Row formats: the columns of the id, title, text and metadata (parsers/tables.py).
    table: TableOptions = DEFAULT_TABLE_OPTIONS

    @property
    def parse_options(self) -> str:
        """The parse options that change what the parsers make of the bytes, as one canonical string ("":
        the defaults). Part of the source key (prepare.source_key): the same bytes under other options are
        parsed again, not answered `unchanged`."""
        return self.table.key()


@dataclass(frozen=True, slots=True)
class Sequence:
    """The ordering token of the event behind a write (S3's per-key `sequencer`, hex).

    A write, delete or sidecar change carrying one applies only if it is newer than the last one
    applied to `key`; the check and the record happen in the write's own transaction, under the
    source's lock, so unordered and repeated events converge on the newest state. Sequencers of
    different lengths compare after left-padding the shorter with zeros (S3's rule).
    """

    key: str
    sequencer: str


@dataclass(frozen=True, slots=True)
class DocumentWrite:
    """What happened to one document."""

    document_id: str
    status: WriteStatus
    chunk_count: int
    # Other documents of the store with the same content_sha256 (the same file under another id, or the
    # same record), oldest first, at most DUPLICATES_LISTED of them (documents/writer.py).
    duplicate_of: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SourceWrite:
    """What happened to one source: each of its documents, and the records it no longer holds."""

    source_id: str
    content_type: str
    content_sha256: str
    documents: list[DocumentWrite]
    removed: list[str] = field(default_factory=list)
    stale: bool = False  # its Sequence was not newer than the one applied: nothing was written

    @property
    def status(self) -> WriteStatus:
        """created when nothing of the source existed, unchanged when nothing changed, else updated."""
        statuses = {d.status for d in self.documents}
        if statuses == {"created"} and not self.removed:
            return "created"
        if statuses <= {"unchanged"} and not self.removed:
            return "unchanged"
        return "updated"

    @property
    def chunk_count(self) -> int:
        """Chunks the source's documents now hold."""
        return sum(d.chunk_count for d in self.documents)

    @property
    def duplicate_of(self) -> list[str]:
        """Stored documents outside the source with the same content as one of its documents."""
        own = {d.document_id for d in self.documents}
        return list(dict.fromkeys(i for d in self.documents for i in d.duplicate_of if i not in own))


@dataclass(frozen=True, slots=True)
class DocumentInfo:
    """A stored document, without its chunks."""

    id: str
    source: str
    title: str
    metadata: dict[str, Any]
    content_type: str
    content_sha256: str
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    written_by: str | None = None  # the credential of its last change (None: written before the audit trail)


@dataclass(frozen=True, slots=True)
class ChunkInfo:
    """A stored chunk: its id (`{documentId}#{chunkIndex}`), place, text and metadata."""

    id: str
    chunk_index: int
    content: str
    metadata: dict[str, Any]
