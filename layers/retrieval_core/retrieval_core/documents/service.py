"""DocumentService: stores and documents, for the HTTP routes, the S3 ingest function and the CLI.

Interface fixed here first so the three callers can be built side by side; the bodies come with
the documents API (issue 15). Every method that names a store checks `grant` the one way
(`grants.Grant.require`): a missing scope is a 403, a store outside the grant a 404.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..db.repository import Store
from ..exceptions import RetrievalError
from ..grants import OPEN_GRANT, Grant
from ..service import RetrievalService
from .models import DocumentInfo, Sequence, SourceInput, SourceWrite, StoreDefinition, StoreInfo


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
        raise NotImplementedError

    def ensure_store(self, name: str) -> Store:
        """The store `name`, created with the default definition if missing (S3 sync, CLI)."""
        raise NotImplementedError

    def get_store(self, name: str, grant: Grant = OPEN_GRANT) -> StoreInfo:
        """One store with its document and chunk counts."""
        raise NotImplementedError

    def list_stores(self, grant: Grant = OPEN_GRANT) -> list[StoreInfo]:
        """The stores `grant` may read, oldest first."""
        raise NotImplementedError

    def delete_store(self, name: str, grant: Grant = OPEN_GRANT) -> None:
        """Drop the store with everything in it; its cached answers are never served again."""
        raise NotImplementedError

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
        raise NotImplementedError

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
        raise NotImplementedError

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
        raise NotImplementedError

    def delete_source(
        self, store: str, source_id: str, grant: Grant = OPEN_GRANT, sequence: Sequence | None = None
    ) -> list[str]:
        """Delete every document whose source or id is `source_id`; the ids deleted (empty: none).

        With `sequence`, a delete older than the last event applied to its key deletes nothing.
        """
        raise NotImplementedError

    def get_document(self, store: str, document_id: str, grant: Grant = OPEN_GRANT) -> DocumentInfo:
        """One document; DocumentNotFoundError (404) when absent."""
        raise NotImplementedError

    def list_documents(
        self,
        store: str,
        prefix: str = "",
        limit: int = 100,
        cursor: str | None = None,
        grant: Grant = OPEN_GRANT,
    ) -> tuple[list[DocumentInfo], str | None]:
        """Documents whose id starts with `prefix`, in id order, and the cursor of the next page."""
        raise NotImplementedError

    def source_hashes(self, store: str, grant: Grant = OPEN_GRANT) -> dict[str, str]:
        """SHA-256 of each stored source's bytes, by source id (sync compares files against it).

        A source whose chunks were made under other settings (parser, chunking, model) maps to "",
        so that sync sees it as changed.
        """
        raise NotImplementedError
