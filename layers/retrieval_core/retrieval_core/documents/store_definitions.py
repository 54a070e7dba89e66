"""A store's row under a new definition, and a row shown as StoreInfo (with its counts and features)."""

from __future__ import annotations

from dataclasses import replace

from retrieval_core.backends.attached.catalog import inspect_indexes, relation_oid
from retrieval_core.backends.attached.exceptions import UnusableSourceError
from retrieval_core.backends.attached.features import describe, features
from retrieval_core.backends.attached.live import LiveSources
from retrieval_core.db import stores as store_sql
from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store
from retrieval_core.documents.chunking import Chunking, chunking_of
from retrieval_core.documents.models import StoreDefinition, StoreInfo
from retrieval_core.exceptions import ConflictError


def store_info(store: Store, counts: tuple[int, int], exact_max_rows: int = 0) -> StoreInfo:
    """The store as the documents API shows it; `counts` are its documents and chunks."""
    source = store.source
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
        text_search=store.text_search,
        source=describe(source) if source is not None else None,
        features=features(source, exact_max_rows) if source is not None else None,
        chunking=Chunking.of_store(store.chunking) if store.chunking is not None else None,
    )


def redefined(
    conn: Connection,
    store: Store,
    display_name: str,
    definition: StoreDefinition,
    text_search: str | None,
    deployment: Chunking,
) -> tuple[Store, bool]:
    """Apply `definition` to an existing store; the store, and whether anything changed (a new version too
    when answers may change: they depend on which keys a filter may name). `deployment`: the chunking a
    store without its own follows, which a definition may give it as its own whatever it holds."""
    if store.storage != definition.storage:
        raise ConflictError.for_field(
            "storage", f"the store holds {store.storage} embeddings; it cannot change"
        )
    if text_search is not None and text_search != store.text_search:
        raise ConflictError.for_field(
            "textSearch",
            f"the store's keyword index uses the text search configuration '{store.text_search}';"
            " it cannot change (create a new store and write the documents again)",
        )
    own = Chunking.of_store(store.chunking) if store.chunking is not None else None
    chunking = definition.chunking
    applied = chunking_of(store.chunking, deployment)
    if chunking is not None and chunking != applied and store.chunk_count:
        cut = applied.as_json()
        raise ConflictError.for_field(
            "pipeline.chunking",
            f"the store holds chunks cut as {cut}; changing that needs its documents chunked again, which "
            "this release cannot do in place: create a new store with this chunking and write the "
            "documents to it",
        )
    keys = definition.allowed_metadata_keys
    unchanged_chunking = chunking is None or chunking == own
    if (display_name, keys) == (store.display_name, store.allowed_metadata_keys) and unchanged_chunking:
        return store, False
    keys_changed = keys != store.allowed_metadata_keys
    store = store_sql.update_store(conn, store, display_name, keys, chunking.as_json() if chunking else None)
    if keys_changed:
        store_sql.bump_version(conn, store)
    return store, True


def inspected(conn: Connection, store: Store, live_sources: LiveSources) -> Store:
    """The attached store with its table's indexes inspected now (searches then use it too, through
    `live_sources`); its rows stay those counted at attach or refresh time (a GET does not scan the
    table). A table that cannot be inspected shows its last inspection; searches answer 409
    source_unavailable."""
    assert store.source is not None
    try:
        with conn.transaction():
            oid = relation_oid(conn, store.source)
            source = inspect_indexes(conn, store.source, oid, count=False)
    except UnusableSourceError:
        return store
    live_sources.remember(store, source)
    return replace(store, source=source)
