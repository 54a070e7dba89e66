"""DocumentService: stores and documents, for the HTTP routes, the S3 ingest function and the CLI.

Every method that names a store checks `grant` the one way (`grants.Grant.require`): a missing
scope is a 403, a store outside the grant a 404. Stores are named by their canonical name here.

A write embeds first, with no connection held, then applies everything in one transaction that
holds advisory locks on its sources and documents and re-reads their state under them; a document
whose state moved meanwhile so that it needs vectors it lacks sends the write round again.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..db import documents as sql
from ..db import stores as store_sql
from ..db.connection import Connection
from ..db.documents import ChunkRow, NewDocument
from ..db.errors import database_errors
from ..db.stores import Store
from ..exceptions import (
    ConflictError,
    DimensionMismatchError,
    DocumentNotFoundError,
    EmbeddingModelMismatchError,
    InvalidRequestError,
    RetrievalError,
    StoreNotFoundError,
)
from ..grants import OPEN_GRANT, Grant
from ..service import BACKEND, RetrievalService
from .models import (
    DocumentInfo,
    DocumentWrite,
    Sequence,
    SourceInput,
    SourceWrite,
    StoreDefinition,
    StoreInfo,
)
from .prepare import PreparedDocument, PreparedSource, check_metadata, newer_sequencer, prepare_source

# The same rule as the CHECK constraint on stores.name: names go into URLs, logs and cache keys.
STORE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
RESERVED_STORE_NAMES = frozenset({"resolve"})
EMBED_BATCH = 256  # texts per provider call
GROUP_TEXTS = 256  # write_sources: sources are grouped until this many texts need embedding
GROUP_SOURCES = 256
_ABSENT = object()
_ROUNDS = 3  # a write re-embeds at most this many times when its documents moved under it

Vectors = dict[tuple[int, str], list[list[float]]]


@dataclass(slots=True)
class _Item:
    """One source of a write: prepared, with its sequence, and what the transaction made of it."""

    prepared: PreparedSource
    sequence: Sequence | None
    result: SourceWrite | None = None
    changed: bool = False
    stale_ids: list[str] = field(default_factory=list)


class _NeedVectors(Exception):
    """A document changed under the write and now needs vectors the write did not compute."""

    def __init__(self, keys: list[tuple[int, str]]) -> None:
        super().__init__("documents changed during the write")
        self.keys = keys


class DocumentService:
    """Writes through the retrieval service's database, embedder and cache."""

    def __init__(self, retrieval: RetrievalService, chunk_size: int, chunk_overlap: int) -> None:
        self.retrieval = retrieval
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap

    # Stores (scope admin to change, read to see).

    def put_store(
        self, name: str, definition: StoreDefinition, grant: Grant = OPEN_GRANT
    ) -> tuple[StoreInfo, bool]:
        """Create the store, or apply `definition` to it; True when created.

        The same definition again changes nothing. A change of `storage` is a ConflictError (409)
        naming the field; `display_name` may change, but never to another store's name or display
        name (409). `resolve` and names outside the store-name rule are refused (422).
        """
        grant.require("admin", name)
        check_store_name(name)
        embedder = self.retrieval.embedder
        version: int | None = None
        with database_errors("writing the store"), self._connection() as conn, conn.transaction():
            store_sql.lock_store_names(conn)
            store = store_sql.find_store_named(conn, name)
            display_name = definition.display_name or (store.display_name if store else name)
            if store_sql.name_taken(conn, display_name, except_store=name):
                raise ConflictError.for_field(
                    "displayName", f"'{display_name}' is already the name or display name of another store"
                )
            keys = definition.allowed_metadata_keys
            if store is None:
                if store_sql.name_taken(conn, name, except_store=name):
                    raise ConflictError.for_field("name", f"'{name}' is the display name of another store")
                store = store_sql.create_store(
                    conn, name, display_name, embedder.model, embedder.dimension, definition.storage, keys
                )
                created = True
            else:
                created = False
                if store.storage != definition.storage:
                    raise ConflictError.for_field(
                        "storage", f"the store holds {store.storage} embeddings; it cannot change"
                    )
                if (display_name, keys) != (store.display_name, store.allowed_metadata_keys):
                    keys_changed = keys != store.allowed_metadata_keys
                    store = store_sql.update_store(conn, store, display_name, keys)
                    if keys_changed:  # answers depend on which keys a filter may name
                        version = store_sql.bump_version(conn, store)
            info = self._info(conn, store)
        if version is not None:
            self.retrieval.publish_store_version(store, version)
        return info, created

    def ensure_store(self, name: str) -> Store:
        """The store `name`, created with the default definition if missing (S3 sync, CLI)."""
        check_store_name(name)
        embedder = self.retrieval.embedder
        with database_errors("creating the store"), self._connection() as conn:
            store = store_sql.find_store_named(conn, name) or store_sql.create_store(
                conn, name, name, embedder.model, embedder.dimension
            )
        self._check_model(store)
        return store

    def get_store(self, name: str, grant: Grant = OPEN_GRANT) -> StoreInfo:
        """One store with its document and chunk counts."""
        grant.require("read", name)
        with database_errors("reading the store"), self._connection() as conn:
            return self._info(conn, self._store(conn, name))

    def list_stores(self, grant: Grant = OPEN_GRANT) -> list[StoreInfo]:
        """The stores `grant` may read, oldest first."""
        grant.require_scope("read")
        with database_errors("listing stores"), self._connection() as conn:
            stores = [s for s in store_sql.list_stores(conn) if grant.can_access(s.name)]
            counts = store_sql.store_counts(conn, [s.id for s in stores])
        return [_store_info(s, counts.get(s.id, (0, 0))) for s in stores]

    def delete_store(self, name: str, grant: Grant = OPEN_GRANT) -> None:
        """Drop the store with everything in it; its cached answers are never served again."""
        grant.require("admin", name)
        with database_errors("deleting the store"), self._connection() as conn:
            store = self._store(conn, name)
            store_sql.drop_store(conn, store)
        if self.retrieval.cache is not None:
            # A store created later under this name gets a new version; until then nothing may
            # trust the cached version of the dropped one.
            self.retrieval.cache.forget_version(BACKEND, store.name)

    # Documents (scope write to change, read to see).

    def write_source(
        self,
        store: str,
        source: SourceInput,
        grant: Grant = OPEN_GRANT,
        create: StoreDefinition | None = None,
        sequence: Sequence | None = None,
    ) -> SourceWrite:
        """Parse, chunk, embed and write one source atomically; the next search sees it, from any instance.

        A missing store is StoreNotFoundError (404), unless `create` is given: then the store is
        created with that definition in the transaction of the first write (S3 sync, CLI).
        The documents' metadata is the source's sidecar metadata (`put_source_metadata`) overlaid
        with `source.metadata`. With `sequence`, an event older than the last applied to its key
        writes nothing (`stale`).

        Unchanged content and chunking: nothing re-embedded. A change of metadata alone updates the
        metadata of the documents and their chunks without re-embedding. Records a row source no
        longer holds are removed. A failure leaves the previous state (and no new empty store).
        """
        grant.require("write", store)
        if create is not None:
            check_store_name(store)
        prepared = self._prepare(source)
        [result] = self._write(store, [_Item(prepared, sequence)], create)
        return result

    def write_sources(
        self,
        store: str,
        sources: Iterable[SourceInput],
        grant: Grant = OPEN_GRANT,
        create: StoreDefinition | None = None,
    ) -> Iterator[SourceWrite | RetrievalError]:
        """`write_source` for many sources, embedding across sources in batches (CLI and sync).

        Yields, in input order, each source's result, or the error that source alone met (a parse
        error, an empty document): one bad file does not stop the others. Errors of the whole
        operation (database, embedder) are raised.
        """
        grant.require("write", store)
        if create is not None:
            check_store_name(store)
        group: list[_Item | RetrievalError] = []
        texts = 0
        for source in sources:
            try:
                prepared = self._prepare(source)
            except RetrievalError as exc:
                group.append(exc)
                continue
            group.append(_Item(prepared, None))
            texts += sum(len(d.chunks) for d in prepared.documents)
            if texts >= GROUP_TEXTS or len(group) >= GROUP_SOURCES:
                yield from self._write_group(store, group, create)
                group, texts = [], 0
        if group:
            yield from self._write_group(store, group, create)

    def put_source_metadata(
        self,
        store: str,
        source_id: str,
        metadata: dict[str, Any] | None,
        sequence: Sequence | None = None,
        create: StoreDefinition | None = None,
    ) -> int:
        """Set (None: remove) the sidecar metadata of `source_id` and apply it to its documents
        without re-embedding; kept for a source not stored yet. Returns how many documents changed.

        With `sequence` (the sidecar object's own key and sequencer), an older event changes nothing.
        """
        if metadata is not None:
            check_metadata(metadata)
        if create is not None:
            check_store_name(store)
        changed = 0
        with database_errors("writing source metadata"), self._connection() as conn, conn.transaction():
            found = self._store_for_write(conn, store, create)
            sql.lock(conn, found, [sql.source_lock_key(source_id)])
            if sequence is not None:
                if not newer_sequencer(sequence.sequencer, sql.applied_sequencer(conn, found, sequence.key)):
                    return 0
                sql.record_sequencer(conn, found, sequence.key, sequence.sequencer, metadata is None)
            previous = sql.sidecar_metadata(conn, found, source_id)
            sql.set_sidecar_metadata(conn, found, source_id, metadata)
            ids = sql.source_document_ids(conn, found, source_id)
            sql.lock(conn, found, ids)
            for state in sql.document_states(conn, found, ids).values():
                # The file's own metadata is what remains when the old sidecar is taken away.
                base = {k: v for k, v in state.metadata.items() if k not in (previous or {})}
                new = {**base, **(metadata or {})}
                if new == state.metadata:
                    continue
                # A chunk's own keys (its block's, the title) are those the document does not hold.
                updated = [
                    {**new, **{k: v for k, v in m.items() if state.metadata.get(k, _ABSENT) != v}}
                    for m in self._chunk_metadata(conn, found, state.id)
                ]
                sql.update_metadata(conn, found, state.id, state.source, None, new, updated)
                changed += 1
            version = store_sql.bump_version(conn, found) if changed else None
        if version is not None:
            self.retrieval.publish_store_version(found, version)
        return changed

    def delete_source(
        self, store: str, source_id: str, grant: Grant = OPEN_GRANT, sequence: Sequence | None = None
    ) -> list[str]:
        """Delete every document whose source or id is `source_id`; the ids deleted (empty: none).

        With `sequence`, a delete older than the last event applied to its key deletes nothing.
        """
        grant.require("write", store)
        with database_errors("deleting documents"), self._connection() as conn, conn.transaction():
            found = self._store(conn, store)
            sql.lock(conn, found, [sql.source_lock_key(source_id)])
            if sequence is not None:
                if not newer_sequencer(sequence.sequencer, sql.applied_sequencer(conn, found, sequence.key)):
                    return []
                sql.record_sequencer(conn, found, sequence.key, sequence.sequencer, True)
            ids = sql.source_document_ids(conn, found, source_id, or_id=True)
            sql.lock(conn, found, ids)
            deleted = sql.remove_documents(conn, found, ids)
            version = store_sql.bump_version(conn, found) if deleted else None
        if version is not None:
            self.retrieval.publish_store_version(found, version)
        return deleted

    def get_document(self, store: str, document_id: str, grant: Grant = OPEN_GRANT) -> DocumentInfo:
        """One document; DocumentNotFoundError (404) when absent."""
        grant.require("read", store)
        with database_errors("reading the document"), self._connection() as conn:
            row = sql.get_document(conn, self._store(conn, store), document_id)
        if row is None:
            raise DocumentNotFoundError(store, document_id)
        return DocumentInfo(*row)

    def list_documents(
        self,
        store: str,
        prefix: str = "",
        limit: int = 100,
        cursor: str | None = None,
        grant: Grant = OPEN_GRANT,
    ) -> tuple[list[DocumentInfo], str | None]:
        """Documents whose id starts with `prefix`, in id order, and the cursor of the next page."""
        grant.require("read", store)
        if not 1 <= limit <= 1000:
            raise InvalidRequestError.for_field("limit", "must be between 1 and 1000", "value_error")
        after = decode_cursor(cursor) if cursor else None
        with database_errors("listing documents"), self._connection() as conn:
            rows = sql.list_documents(conn, self._store(conn, store), prefix, after, limit + 1)
        page = [DocumentInfo(*r) for r in rows[:limit]]
        return page, (encode_cursor(page[-1].id) if len(rows) > limit else None)

    def source_hashes(self, store: str, grant: Grant = OPEN_GRANT) -> dict[str, str]:
        """SHA-256 of each stored source's bytes, by source id (sync compares files against it).

        A source whose chunks were made under other settings (parser, chunking, model) maps to "",
        so that sync sees it as changed.
        """
        from .prepare import fingerprint

        grant.require("read", store)
        with database_errors("reading source hashes"), self._connection() as conn:
            found = self._store(conn, store)
            rows = sql.source_fingerprints(conn, found)
        hashes: dict[str, str] = {}
        for source, source_sha256, content_type, stored in rows:
            current = fingerprint(content_type, self.chunk_size, self.chunk_overlap, found.embedding_model)
            value = source_sha256 if source_sha256 is not None and stored == current else ""
            # Documents of one source disagreeing (a write interrupted by an older ingest): changed.
            hashes[source] = value if hashes.get(source, value) == value else ""
        return hashes

    # The write itself.

    def _prepare(self, source: SourceInput) -> PreparedSource:
        model = self.retrieval.embedder.model
        return prepare_source(source, self.chunk_size, self.chunk_overlap, model)

    def _write_group(
        self, store: str, group: list[_Item | RetrievalError], create: StoreDefinition | None
    ) -> Iterator[SourceWrite | RetrievalError]:
        items = [g for g in group if isinstance(g, _Item)]
        results = iter(self._write(store, items, create) if items else [])
        for entry in group:
            yield entry if isinstance(entry, RetrievalError) else next(results)

    def _write(self, store: str, items: list[_Item], create: StoreDefinition | None) -> list[SourceWrite]:
        """Embed what the stored state lacks, then apply every item in one transaction."""
        vectors: Vectors = {}
        with database_errors("reading documents"), self._connection() as conn:
            found = store_sql.find_store_named(conn, store)
            if found is None and create is None:
                raise StoreNotFoundError(store)
            if found is not None:
                self._check_model(found)
                ids = [d.id for item in items for d in item.prepared.documents]
                states = sql.document_states(conn, found, ids)
            else:
                states = {}
        needed = [
            (n, doc)
            for n, item in enumerate(items)
            for doc in item.prepared.documents
            if not _same_content(item.prepared, doc, states.get(doc.id))
        ]
        for _ in range(_ROUNDS):
            self._embed(store, needed, vectors)
            try:
                version, found = self._apply(store, items, create, vectors)
            except _NeedVectors as exc:
                wanted = set(exc.keys)
                needed = [
                    (n, doc)
                    for n, item in enumerate(items)
                    for doc in item.prepared.documents
                    if (n, doc.id) in wanted
                ]
                continue
            if version is not None:
                self.retrieval.publish_store_version(found, version)
            return [item.result for item in items if item.result is not None]
        raise RetrievalError("the documents kept changing during the write; try again")

    def _apply(
        self, store: str, items: list[_Item], create: StoreDefinition | None, vectors: Vectors
    ) -> tuple[int | None, Store]:
        with database_errors("writing documents"), self._connection() as conn, conn.transaction():
            found = self._store_for_write(conn, store, create)
            keys = [sql.source_lock_key(item.prepared.source_id) for item in items]
            keys += [d.id for item in items for d in item.prepared.documents]
            sql.lock(conn, found, keys)
            missing: list[tuple[int, str]] = []
            for n, item in enumerate(items):
                missing += self._apply_item(conn, found, n, item, vectors)
            if missing:
                raise _NeedVectors(missing)
            changed = any(item.changed for item in items)
            return (store_sql.bump_version(conn, found) if changed else None), found

    def _apply_item(
        self, conn: Connection, store: Store, n: int, item: _Item, vectors: Vectors
    ) -> list[tuple[int, str]]:
        """Apply one source under its locks; the (item, document) keys that need vectors first."""
        prepared, sequence = item.prepared, item.sequence
        if sequence is not None and not newer_sequencer(
            sequence.sequencer, sql.applied_sequencer(conn, store, sequence.key)
        ):
            item.result = SourceWrite(
                prepared.source_id, prepared.content_type, prepared.source_sha256, [], stale=True
            )
            return []
        sidecar = sql.sidecar_metadata(conn, store, prepared.source_id)
        new_ids = {d.id for d in prepared.documents}
        previous_ids = set(sql.source_document_ids(conn, store, prepared.source_id))
        removed = sorted(previous_ids - new_ids)
        sql.lock(conn, store, removed)
        states = sql.document_states(conn, store, list(new_ids))
        missing = [
            (n, d.id)
            for d in prepared.documents
            if not _same_content(prepared, d, states.get(d.id)) and (n, d.id) not in vectors
        ]
        if missing:
            return missing
        writes: list[DocumentWrite] = []
        rewrite: list[NewDocument] = []
        rehashed: list[str] = []
        for doc in prepared.documents:
            state = states.get(doc.id)
            metadata = prepared.document_metadata(doc, sidecar)
            chunk_metadata = doc.chunk_metadata(metadata)
            if state is None or not _same_content(prepared, doc, state):
                chunks = [
                    ChunkRow(doc.id, i, chunk.text, chunk_metadata[i], vector)
                    for i, (chunk, vector) in enumerate(zip(doc.chunks, vectors[(n, doc.id)], strict=True))
                ]
                rewrite.append(
                    NewDocument(
                        doc.id,
                        prepared.source_id,
                        prepared.source_sha256,
                        doc.title,
                        metadata,
                        prepared.content_type,
                        doc.content_sha256,
                        prepared.fingerprint,
                        chunks,
                    )
                )
                writes.append(DocumentWrite(doc.id, "created" if state is None else "updated", len(chunks)))
            elif state.metadata != metadata or state.source != prepared.source_id:
                sql.update_metadata(
                    conn, store, doc.id, prepared.source_id, prepared.source_sha256, metadata, chunk_metadata
                )
                writes.append(DocumentWrite(doc.id, "updated", len(doc.chunks)))
            else:
                writes.append(DocumentWrite(doc.id, "unchanged", len(doc.chunks)))
                if state.source_sha256 != prepared.source_sha256:
                    rehashed.append(doc.id)  # another record of its file changed
        sql.set_source_sha256(conn, store, rehashed, prepared.source_sha256)
        sql.write_documents(conn, store, rewrite)
        deleted = sql.remove_documents(conn, store, removed)
        if sequence is not None:
            sql.record_sequencer(conn, store, sequence.key, sequence.sequencer, False)
        item.result = SourceWrite(
            prepared.source_id, prepared.content_type, prepared.source_sha256, writes, sorted(deleted)
        )
        item.changed = item.result.status != "unchanged"
        return []

    def _embed(self, store: str, needed: list[tuple[int, PreparedDocument]], vectors: Vectors) -> None:
        """Vectors for every chunk of `needed`, EMBED_BATCH texts per provider call, across documents."""
        embedder = self.retrieval.embedder
        texts = [(key, text) for n, doc in needed for key in [(n, doc.id)] for text in doc.embedding_texts()]
        for key, _ in texts:
            vectors[key] = []
        for start in range(0, len(texts), EMBED_BATCH):
            batch = texts[start : start + EMBED_BATCH]
            embedded = embedder.embed([t for _, t in batch], "document")
            for (key, _), vector in zip(batch, embedded, strict=True):
                if len(vector) != embedder.dimension:
                    raise DimensionMismatchError(store, embedder.dimension, len(vector), "ingest")
                vectors[key].append(list(vector))

    # Helpers.

    def _connection(self) -> Any:
        return self.retrieval.database.connection()

    def _store(self, conn: Connection, name: str) -> Store:
        store = store_sql.find_store_named(conn, name)
        if store is None:
            raise StoreNotFoundError(name)
        return store

    def _store_for_write(self, conn: Connection, name: str, create: StoreDefinition | None) -> Store:
        """The store, created in the caller's transaction from `create` when it is missing."""
        store = store_sql.find_store_named(conn, name)
        if store is None:
            if create is None:
                raise StoreNotFoundError(name)
            embedder = self.retrieval.embedder
            store = store_sql.create_store(
                conn,
                name,
                create.display_name or name,
                embedder.model,
                embedder.dimension,
                create.storage,
                create.allowed_metadata_keys,
            )
        self._check_model(store)
        return store

    def _check_model(self, store: Store) -> None:
        embedder = self.retrieval.embedder
        if store.embedding_model != embedder.model:
            raise EmbeddingModelMismatchError(store.name, store.embedding_model, embedder.model)
        if store.dimension != embedder.dimension:
            raise DimensionMismatchError(store.name, store.dimension, embedder.dimension, "ingest")

    def _chunk_metadata(self, conn: Connection, store: Store, document_id: str) -> list[dict[str, Any]]:
        rows = conn.execute(
            "SELECT metadata FROM chunks WHERE store_id = %s AND document_id = %s ORDER BY chunk_index",
            (store.id, document_id),
        ).fetchall()
        return [dict(r[0]) for r in rows]

    def _info(self, conn: Connection, store: Store) -> StoreInfo:
        counts = store_sql.store_counts(conn, [store.id])
        return _store_info(store, counts.get(store.id, (0, 0)))


def _same_content(prepared: PreparedSource, doc: PreparedDocument, state: sql.DocumentState | None) -> bool:
    """Stored with the same bytes and the same fingerprint: its chunks and vectors would not change."""
    return (
        state is not None
        and state.content_sha256 == doc.content_sha256
        and state.fingerprint == prepared.fingerprint
        and state.chunk_count == len(doc.chunks)
    )


def _store_info(store: Store, counts: tuple[int, int]) -> StoreInfo:
    return StoreInfo(
        name=store.name,
        display_name=store.display_name,
        storage=store.storage,
        embedding_model=store.embedding_model,
        dimension=store.dimension,
        allowed_metadata_keys=store.allowed_metadata_keys,
        document_count=counts[0],
        chunk_count=counts[1],
        version=store.version,
    )


def check_store_name(name: str) -> None:
    """A 422 for names outside the store-name rule, and for reserved names (routes, not stores)."""
    if name in RESERVED_STORE_NAMES:
        raise InvalidRequestError.for_field("store", f"'{name}' is reserved (a route)", "reserved")
    if not STORE_NAME.fullmatch(name):
        raise InvalidRequestError.for_field(
            "store",
            "must be 1-128 ASCII letters, digits, '.', '_' or '-', starting with a letter or digit; "
            "any Unicode text may go in the display name",
            "pattern",
        )


def encode_cursor(last_id: str) -> str:
    """The opaque cursor of the page after `last_id`."""
    return base64.urlsafe_b64encode(last_id.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The id a cursor continues after; a 422 naming `cursor` when it is not one of ours."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise InvalidRequestError.for_field("cursor", "not a cursor of this service", "value_error") from None
