"""Bodies of the write side's routes (stores and documents), in camelCase like the rest of the API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from retrieval_core.db.attached_source import Distance, Preset
from retrieval_core.db.storage import Storage
from retrieval_core.schemas.common import RequestModel, ResponseModel, Text, WriteStatus, absent_when_none

MetadataKey = Annotated[Text, Field(min_length=1, max_length=256)]


Identifier = Annotated[Text, Field(min_length=1, max_length=63)]


class SourceColumns(RequestModel):
    """Which column of the table holds what; a preset fills in its library's names."""

    id: Identifier | None = Field(default=None, description="A unique row id (any type; read as text).")
    content: Identifier | None = Field(default=None, description="The text (text or varchar).")
    embedding: Identifier | None = Field(default=None, description="A pgvector vector or halfvec column.")
    metadata: Identifier | list[Identifier] | None = Field(
        default=None,
        description="A json/jsonb column, or a list of plain columns each exposed as a metadata key.",
    )
    document_id: Identifier | None = Field(default=None, description="Optional: what docIds match.")
    title: Identifier | None = Field(default=None, description="Optional: a text title, shown in metadata.")
    fulltext: Identifier | None = Field(
        default=None, description="Optional: a tsvector column of the content, for keyword and hybrid search."
    )


class SourceBlock(RequestModel):
    """An existing table or view the store reads instead of documents of its own (docs/existing-tables.md)."""

    table: Text | None = Field(
        default=None, max_length=200, description="schema.table (a bare name is in `public`), or a view."
    )
    schema_name: Identifier | None = Field(
        default=None, alias="schema", description="The schema, when the table name itself holds a dot."
    )
    columns: SourceColumns | None = None
    distance: Distance = Field(
        default="cosine",
        description="The distance the vectors were made for. Search and scores are always cosine: "
        "score = 1 - cosine distance.",
    )
    dimension: int | None = Field(
        default=None, ge=1, le=16000, description="Only for an untyped vector column of an empty table."
    )
    embedding_model: Text | None = Field(
        default=None,
        max_length=256,
        description="The model that made the vectors; default: this service's when the dimension matches. "
        "Another model: the store takes precomputed vectors only.",
    )
    preset: Preset | None = Field(
        default=None, description="langchain-postgres, langchain-postgres-v2, llamaindex."
    )
    collection: Text | None = Field(
        default=None, max_length=1024, description="langchain-postgres: the collection's name."
    )
    text_search: Text | None = Field(
        default=None,
        min_length=1,
        max_length=127,
        description="The text search configuration the fulltext column was made with (default english).",
    )
    add_fulltext: bool = Field(
        default=False,
        description="ALTER the table: add a generated tsvector column of the content and its GIN index "
        "(rewrites the table under an exclusive lock; the service's user must own it).",
    )

    writable: bool = Field(
        default=False,
        description="Let the documents API write the table's rows (PUT/DELETE of a document replace or "
        "delete its rows through the mapped columns); checked against the catalog. Default: read-only.",
    )


# The strategies of documents/chunking.py (a unit test holds the two lists equal).
ChunkingStrategy = Literal["fixed", "contextual"]


class ChunkingOptions(RequestModel):
    """How a store cuts each block (a PDF page, a heading's section) into chunks."""

    strategy: ChunkingStrategy = Field(
        default="fixed",
        description="fixed: each chunk embedded and keyword-indexed as its document title and its text. "
        "contextual: the same chunks, each embedded and keyword-indexed after a header with its section "
        "path or page; the text returned is the chunk's own either way.",
    )
    size: int = Field(default=1000, ge=100, le=8000, description="The most characters a chunk holds.")
    overlap: int = Field(
        default=150,
        ge=0,
        le=4000,
        description="Characters the next chunk of a block repeats; at most size / 2.",
    )

    @model_validator(mode="after")
    def _overlap_within_size(self) -> ChunkingOptions:
        if self.overlap > self.size // 2:
            raise ValueError(f"overlap {self.overlap} is more than half of size {self.size}")
        return self


class PipelineOptions(RequestModel):
    """How the store turns documents into chunks. Absent parts: the deployment's for a new store,
    unchanged for an existing one."""

    chunking: ChunkingOptions | None = None


class ChunkingSettings(ResponseModel):
    """A store's chunking as it applies."""

    strategy: ChunkingStrategy
    size: int
    overlap: int
    own: bool = Field(
        description="true: the store's own; false: the deployment's CHUNK_SIZE and CHUNK_OVERLAP, which "
        "the store follows until it is given its own."
    )


class EmbedderSettings(ResponseModel):
    """The model that embedded the store's chunks and embeds its queries."""

    model: str
    dimension: int


class PipelineSettings(ResponseModel):
    """How the store turns documents into chunks."""

    embedder: EmbedderSettings
    chunking: ChunkingSettings


class StorePutRequest(RequestModel):
    """A store definition. Dimension and embedding model come from the service's embedder."""

    display_name: Text | None = Field(
        default=None, min_length=1, max_length=256, description="Any Unicode text; defaults to the name."
    )
    storage: Storage = Field(
        default="vector", description="vector (4-byte floats) or halfvec (2-byte floats); fixed once created."
    )
    allowed_metadata_keys: list[MetadataKey] | None = Field(
        default=None, max_length=256, description="Keys a metadata filter may name; null: every key."
    )
    text_search: Text | None = Field(
        default=None,
        min_length=1,
        max_length=127,
        description="PostgreSQL text search configuration of the keyword index (english, simple, german, "
        "french, ...: any name in pg_ts_config); stems words and drops stopwords at write and at query time. "
        "Fixed once created; null or absent: english for a new store, unchanged for an existing one.",
    )
    source: SourceBlock | None = Field(
        default=None,
        description="Attach the store to an existing table or view (read-only unless `writable`; "
        "docs/existing-tables.md).",
    )
    pipeline: PipelineOptions | None = Field(
        default=None,
        description="How documents become chunks (docs/documents-api.md, 'Pipeline'). A store that holds "
        "chunks keeps its chunking: another one is a 409.",
    )


class StoreResponse(ResponseModel):
    """A store as the write side shows it."""

    name: str
    display_name: str
    storage: Storage
    embedding_model: str
    dimension: int
    allowed_metadata_keys: list[str] | None
    text_search: str = Field(description="PostgreSQL text search configuration of the keyword index.")
    document_count: int
    chunk_count: int
    pipeline: PipelineSettings | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="How documents become chunks (absent for an attached store, whose rows are its own).",
    )
    # A store of our own shows no source or features, as before attached stores existed.
    source: dict[str, Any] | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="An attached store's table and mapping (absent for the service's own stores).",
    )
    features: list[dict[str, Any]] | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="An attached store: each feature, whether the table supports it, and what that means.",
    )


class StoreListResponse(ResponseModel):
    """A page of the stores the caller may read, in name order; `nextCursor` null on the last page."""

    stores: list[StoreResponse]
    next_cursor: str | None


class DocumentPutRequest(RequestModel):
    """A document's content: `text`, or a file as base64 `content` with its `contentType`."""

    text: Text | None = Field(
        default=None, description="Plain text (or text of `contentType`, e.g. Markdown)."
    )
    content: str | None = Field(default=None, description="The file's bytes, base64-encoded.")
    content_type: Text | None = Field(
        default=None,
        max_length=255,
        description="e.g. application/pdf; omitted: decided from fileName and the bytes.",
    )
    file_name: Text | None = Field(default=None, min_length=1, max_length=1024)
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Travels with every chunk; documentId and chunkIndex are reserved (the API adds them).",
    )

    @model_validator(mode="after")
    def _one_content(self) -> DocumentPutRequest:
        if (self.text is None) == (self.content is None):
            raise ValueError("give exactly one of text and content")
        return self


DUPLICATE_OF_NOTE = (
    "Other documents of the store whose content is the same as this one's (the same contentSha256: the "
    "same file bytes, or the same record), oldest first, at most 10. Empty: none. Search shows one of "
    "them unless collapseDuplicates is false."
)


class DocumentWriteItem(ResponseModel):
    """One record of a row source (CSV, JSONL)."""

    document_id: str
    status: WriteStatus
    chunk_count: int
    duplicate_of: list[str] = Field(default_factory=list, description=DUPLICATE_OF_NOTE)


class DocumentWriteResponse(ResponseModel):
    """What a PUT did: `created`, `updated` or `unchanged` (nothing re-embedded)."""

    document_id: str
    status: WriteStatus
    chunk_count: int
    content_sha256: str
    content_type: str
    documents: list[DocumentWriteItem] | None = Field(
        default=None, description="A row source (CSV, JSONL): each record's document."
    )
    removed: list[str] | None = Field(default=None, description="Records the source no longer holds.")
    duplicate_of: list[str] = Field(
        default_factory=list,
        description=DUPLICATE_OF_NOTE
        + " A row source: the documents outside it that share a record's content.",
    )


class DocumentResponse(ResponseModel):
    """A stored document, without its chunks."""

    document_id: str
    source: str
    title: str
    metadata: dict[str, Any]
    content_type: str
    content_sha256: str
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    written_by: str | None = Field(
        default=None,
        description="the credential of the document's last change (an API key's name, jwt:<subject>, "
        "s3:<principal>, cli:<user>); null when written before the audit trail was kept",
    )


class DocumentListResponse(ResponseModel):
    """A page of documents in id order; `nextCursor` null on the last page."""

    documents: list[DocumentResponse]
    next_cursor: str | None


class ChunkItem(ResponseModel):
    """One chunk of a document as the parser and chunker made it."""

    id: str = Field(description="The chunk id: documentId#chunkIndex (the index is after the last #).")
    chunk_index: int = Field(description="Its place in the document, from 0.")
    content: str
    metadata: dict[str, Any] = Field(
        description="The chunk's stored metadata (the document's, its part's, the title), as retrieve "
        "results carry it without the documentId and chunkIndex they add."
    )
    page_number: int | None = Field(
        description="The 1-based page of a PDF the chunk was cut from (metadata.pageNumber); null otherwise."
    )
    section: str | None = Field(
        description="The heading path above the chunk in Markdown, HTML or DOCX, e.g. 'Guide > Install' "
        "(metadata.section); null otherwise."
    )


class ChunkListResponse(ResponseModel):
    """A page of a document's chunks in chunk order; `nextCursor` null on the last page."""

    document_id: str
    chunks: list[ChunkItem]
    next_cursor: str | None


IngestionOutcome = Literal["ok", "failed", "skipped"]


class DocumentStatusItem(ResponseModel):
    """A source's last outcome: what its last write came to, and when."""

    document_id: str = Field(description="The id the source was written as (a row source's, not a record's).")
    status: IngestionOutcome
    change: WriteStatus | None = Field(default=None, description="ok: created, updated or unchanged.")
    code: str | None = Field(default=None, description="failed or skipped: the error's code.")
    message: str | None = Field(default=None, description="failed or skipped: what went wrong.")
    written_by: str | None = Field(default=None, description="The credential of that write.")
    at: datetime


class IngestionStatistics(ResponseModel):
    """The store's cumulative counts of sources since `since` (scanned = added + updated + unchanged +
    failed + skipped), and how many sources' last outcome is each status now."""

    scanned: int
    added: int
    updated: int
    unchanged: int
    deleted: int
    failed: int
    skipped: int
    since: datetime | None = Field(description="When counting began (null: nothing written yet).")
    last_at: datetime | None = Field(description="The last write or delete counted.")
    now_ok: int
    now_failed: int
    now_skipped: int


class DocumentStatusListResponse(ResponseModel):
    """A page of sources whose last outcome is the `status` asked for, in id order, and the store's counts."""

    documents: list[DocumentStatusItem]
    statistics: IngestionStatistics
    next_cursor: str | None
