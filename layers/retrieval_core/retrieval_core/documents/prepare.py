"""From a source's bytes to documents ready to embed: parse, chunk, hash, check. Pure: no I/O.

Hashes and fingerprints:
- `content_sha256`: SHA-256 of a document's own bytes (the file's, or a canonical serialisation of
  its record for CSV/JSONL);
- `source_sha256`: SHA-256 of the whole source's bytes;
- `source_key`: what the parsers are given besides the service's settings: the bytes' hash, the declared
  content type, the file name and the parse options (`SourceInput.parse_options`). A source whose key and
  fingerprint match what is stored is answered `unchanged` before it is parsed (documents/unchanged.py);
- `fingerprint`: everything else that shapes the stored chunks and vectors. A document with the same
  content hash and fingerprint is never re-embedded.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrieval_core.documents.chunking import Chunk, chunk_blocks
from retrieval_core.documents.models import SourceInput
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.names import DOT_SEGMENT_RULE, holds_dot_segment
from retrieval_core.parsers import DEFAULT_BUDGET, PARSER_VERSION, ParseBudget, ParseMeter, parse
from retrieval_core.parsers.base import ParsedDocument
from retrieval_core.parsers.detect import CSV, JSONL
from retrieval_core.parsers.exceptions import EmptyDocumentError
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, TableOptions
from retrieval_core.schemas.common import MAX_DOCUMENT_ID_BYTES

if TYPE_CHECKING:
    from retrieval_core.parsers.scanned_pages import OcrEngine

# Bump when the way blocks become chunks changes (parsers.PARSER_VERSION covers the parsers): every
# document is then re-embedded once.
CHUNKING_VERSION = "1"
# How a chunk is embedded: its document's title, a blank line, then the chunk (BEIR convention).
TITLE_CONVENTION = "title\n\nchunk"

# The API adds these to every chunk it returns; a document may not set them.
RESERVED_METADATA_KEYS = ("documentId", "chunkIndex")
# The same rule as the CHECK constraint on stores.name: names go into URLs, logs and cache keys.
STORE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RESERVED_STORE_NAMES = frozenset({"resolve"})
# Half of a UTF-16 pair on its own: a str may hold one (a JSON escape, an exotic charset), UTF-8 cannot.
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_METADATA_KEYS = 64
MAX_METADATA_BYTES = 16_384
# Objects and arrays nested in one another, the metadata object itself being level 1. Every read answers
# through pydantic-core's JSON serializer, which refuses nesting past 254 levels ("Circular reference
# detected"), and MCP clients parse answers with a limit of 200; a chunk's metadata sits a few levels
# deep in every answer, so writes stay far below both.
MAX_METADATA_DEPTH = 32


@dataclass(frozen=True, slots=True)
class PreparedDocument:
    """One document of a source, chunked, before embedding."""

    id: str
    title: str
    content_sha256: str
    # What the file says of the document (parser metadata, contentType, fileName), before the
    # sidecar and caller metadata are laid over it.
    metadata: dict[str, Any]
    chunks: list[Chunk]
    # The store's chunking is contextual: each chunk's section path or page joins its title.
    contextual: bool = False

    def embedding_texts(self) -> list[str]:
        """What is embedded for each chunk (TITLE_CONVENTION): the title, with the contextual strategy the
        chunk's section path or page (as the keyword text has them, migration 19), then its text."""
        texts = []
        for chunk in self.chunks:
            header = [self.title] if self.title else []
            if self.contextual and (where := chunk_place(chunk.metadata)):
                header.append(where)
            texts.append("\n".join(header) + "\n\n" + chunk.text if header else chunk.text)
        return texts

    def chunk_metadata(self, document_metadata: dict[str, Any]) -> list[dict[str, Any]]:
        """Each chunk's metadata: the document's, its block's, and the title when there is one."""
        title = {"title": self.title} if self.title else {}
        return [{**document_metadata, **chunk.metadata, **title} for chunk in self.chunks]


@dataclass(frozen=True, slots=True)
class PreparedSource:
    """A parsed and chunked source."""

    source_id: str
    source_sha256: str
    source_key: str
    content_type: str
    fingerprint: str
    caller_metadata: dict[str, Any]
    documents: list[PreparedDocument]

    def document_metadata(self, document: PreparedDocument, sidecar: dict[str, Any] | None) -> dict[str, Any]:
        """The file's metadata, overlaid with the sidecar's, overlaid with the caller's."""
        return {**document.metadata, **(sidecar or {}), **self.caller_metadata}


def chunk_place(metadata: dict[str, Any]) -> str:
    """Where a chunk sits, for its contextual header: its section path, else `page N`, else ''."""
    section = metadata.get("section")
    if isinstance(section, str) and section:
        return section
    page = metadata.get("pageNumber")
    return f"page {page}" if page is not None else ""


def fingerprint(
    content_type: str,
    chunk_size: int,
    chunk_overlap: int,
    embedding_model: str,
    table: TableOptions = DEFAULT_TABLE_OPTIONS,
    strategy: str = "fixed",
) -> str:
    """Hash of what shapes the stored chunks and vectors besides the content; a row format's
    TableOptions count when they are not the defaults, and the chunking strategy when it is not fixed
    (so that documents written before strategies existed keep their fingerprints)."""
    parts: list[str | int] = [
        PARSER_VERSION,
        CHUNKING_VERSION,
        content_type,
        chunk_size,
        chunk_overlap,
        embedding_model,
        TITLE_CONVENTION,
    ]
    if content_type in (CSV, JSONL) and table.key():
        parts.append(table.key())
    if strategy != "fixed":
        parts.append(strategy)
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def source_key(source: SourceInput, source_sha256: str | None = None) -> str:
    """SHA-256 of what the parsers make a source of, besides the settings in `fingerprint`: its bytes (by
    their hash, `source_sha256` when already known), declared content type, file name and parse options."""
    parts = [source_sha256 or sha256_hex(source.data), source.content_type, source.name, source.parse_options]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def prepare_source(
    source: SourceInput,
    chunk_size: int,
    chunk_overlap: int,
    embedding_model: str,
    budget: ParseBudget = DEFAULT_BUDGET,
    cancelled: threading.Event | None = None,
    ocr: OcrEngine | None = None,
    strategy: str = "fixed",
) -> PreparedSource:
    """Parse and chunk `source` within `budget` (its time too), stopping once `cancelled` is set; a PDF's
    scanned pages are read by `ocr` (None: not read); `strategy` is the store's chunking strategy. Raises
    the parser's errors (415, 422; DocumentLimitError over the budget; OCR's), or a 422 for a bad id or
    metadata."""
    check_document_id(source.source_id)
    check_metadata(source.metadata)
    meter = ParseMeter(budget, cancelled)
    parsed = parse(source.data, source.content_type, source.name, meter, ocr, source.table)
    known: dict[str, Any] = {"contentType": parsed.content_type}
    if source.name:
        known["fileName"] = source.name
    by_id: dict[str, PreparedDocument] = {}
    for number, doc in enumerate(parsed.documents, start=1):
        if parsed.is_records:
            doc_id = doc.record_id or f"{source.source_id}#{doc.record_number or number}"
        else:
            doc_id = source.source_id
        check_document_id(doc_id)
        check_parsed(doc, f"records[{doc.record_number or number}]" if parsed.is_records else "document")
        content_sha256 = sha256_hex(_canonical_record(doc) if parsed.is_records else source.data)
        meter.tick()
        chunks = chunk_blocks(doc.blocks, chunk_size, chunk_overlap)
        meter.within("max_chunks", len(chunks), f"document '{doc_id[:80]}': chunks")
        if not chunks:
            if parsed.is_records:
                continue  # an empty record is skipped, as the ingest always did
            raise EmptyDocumentError(parsed.content_type)
        by_id.pop(doc_id, None)  # the same id twice in one file: the later record wins
        metadata = {**known, **doc.metadata}
        by_id[doc_id] = PreparedDocument(
            doc_id, doc.title, content_sha256, metadata, chunks, contextual=strategy == "contextual"
        )
    if not by_id:
        raise EmptyDocumentError(parsed.content_type)
    meter.check()
    source_sha256 = sha256_hex(source.data)
    return PreparedSource(
        source.source_id,
        source_sha256,
        source_key(source, source_sha256),
        parsed.content_type,
        fingerprint(parsed.content_type, chunk_size, chunk_overlap, embedding_model, source.table, strategy),
        dict(source.metadata),
        list(by_id.values()),
    )


def check_store_name(name: str) -> None:
    """A 422 for names outside the store-name rule, and for reserved names (routes, not stores)."""
    if name in RESERVED_STORE_NAMES:
        raise InvalidRequestError.for_field("store", f"'{name}' is reserved (a route)", "reserved")
    if not STORE_NAME.fullmatch(name):
        rule = (
            "must be 1-128 ASCII letters, digits, '.', '_' or '-', starting with a letter or digit; "
            "any Unicode text may go in the display name"
        )
        raise InvalidRequestError.for_field("store", rule, "pattern", f"store name {rule}")


def check_document_id(document_id: str) -> None:
    """A 422 unless `document_id` is 1 to 1,024 bytes of UTF-8 without NUL and without a `.` or `..` path
    segment (`names.py`)."""
    try:
        size = len(document_id.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidRequestError.for_field("documentId", "must be valid Unicode", "value_error") from None
    if not 1 <= size <= MAX_DOCUMENT_ID_BYTES or "\x00" in document_id:
        raise InvalidRequestError.for_field(
            "documentId",
            f"must be 1 to {MAX_DOCUMENT_ID_BYTES} bytes of UTF-8 without NUL (got {size} bytes)",
            "value_error",
        )
    if holds_dot_segment(document_id):
        raise InvalidRequestError.for_field(
            "documentId", DOT_SEGMENT_RULE, "dot_segment", f"document id {document_id!r} {DOT_SEGMENT_RULE}"
        )


def check_parsed(doc: ParsedDocument, where: str) -> None:
    """A 422 naming `where` (`records[3]`, `document`) for what a file gave that reads could not serve:
    its metadata (a record's columns, with its title) beyond the metadata rules, or text that is not
    Unicode PostgreSQL can hold (a lone surrogate, from a JSON escape or an exotic charset)."""
    check_metadata({**doc.metadata, **({"title": doc.title} if doc.title else {})}, f"{where}.metadata")
    for name, texts in (("title", [doc.title]), ("text", [block.text for block in doc.blocks])):
        surrogate = next((found for text in texts if (found := _SURROGATE.search(text))), None)
        if surrogate is not None:
            raise InvalidRequestError.for_field(
                f"{where}.{name}",
                f"is not valid Unicode: it holds a lone surrogate (U+{ord(surrogate.group()):04X})",
                "value_error",
            )


def check_metadata(metadata: dict[str, Any], field: str = "metadata") -> None:
    """A 422 for reserved keys, more than MAX_METADATA_KEYS keys, nesting deeper than MAX_METADATA_DEPTH,
    more than MAX_METADATA_BYTES of JSON, or values jsonb cannot hold (NaN, Infinity, NUL, surrogates)."""
    reserved = sorted(set(metadata) & set(RESERVED_METADATA_KEYS))
    if reserved:
        raise InvalidRequestError.for_field(
            f"{field}.{reserved[0]}", "is set by the service on every chunk; use another key", "reserved_key"
        )
    if len(metadata) > MAX_METADATA_KEYS:
        raise InvalidRequestError.for_field(
            field, f"at most {MAX_METADATA_KEYS} keys (got {len(metadata)})", "too_long"
        )
    if _deeper_than(metadata, MAX_METADATA_DEPTH):
        raise InvalidRequestError.for_field(
            field, f"at most {MAX_METADATA_DEPTH} levels of nested objects and arrays", "too_deep"
        )
    try:
        encoded = json.dumps(metadata, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise InvalidRequestError.for_field(field, f"must be JSON: {exc}", "value_error") from None
    if len(encoded) > MAX_METADATA_BYTES:
        raise InvalidRequestError.for_field(
            field, f"at most {MAX_METADATA_BYTES} bytes of JSON (got {len(encoded)})", "too_long"
        )
    if b"\\u0000" in encoded:
        raise InvalidRequestError.for_field(field, "must not contain NUL (\\u0000) characters", "value_error")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest more than `limit` levels in `value` (iterative: any depth is safe)."""
    pending = [(value, 1)]
    while pending:
        item, level = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if level > limit:
            return True
        pending.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return False


def newer_sequencer(candidate: str, applied: str | None) -> bool:
    """Whether `candidate` orders after `applied` (S3: left-pad the shorter hex with zeros, compare)."""
    if applied is None:
        return True
    width = max(len(candidate), len(applied))
    return candidate.lower().rjust(width, "0") > applied.lower().rjust(width, "0")


def _canonical_record(doc: ParsedDocument) -> bytes:
    record = {"id": doc.record_id, "title": doc.title, "text": doc.text, "metadata": doc.metadata}
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str).encode()


def sha256_hex(data: bytes) -> str:
    """Hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()
