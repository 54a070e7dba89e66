"""What an attached store supports, and what it costs when it does not. Pure: no database client."""

from __future__ import annotations

from typing import Any

from retrieval_core.db.attached_source import AttachedSource


def relation_name(source: AttachedSource) -> str:
    """`schema.table`, for messages."""
    return f"{source.schema}.{source.table}"


def no_index_reason(source: AttachedSource) -> str:
    """Why the exact scan answers (the source has no serving index)."""
    if source.other_vector_indexes:
        return (
            f"no index on {relation_name(source)} serves cosine distance (its vector indexes are for another "
            f"operator: {', '.join(source.other_vector_indexes)})"
        )
    return f"no HNSW index on {relation_name(source)} serves cosine distance"


Feature = tuple[str, bool, str]


def features(source: AttachedSource, exact_max_rows: int) -> list[dict[str, Any]]:
    """One entry per feature: {feature, supported, detail} (camelCase, for GET /stores/{store})."""
    entries: list[Feature] = [_vector_search(source, exact_max_rows)]
    if source.distance != "cosine":
        entries.append(
            (
                "distance",
                True,
                f"the vectors were made for {source.distance}; results are still ranked and scored by cosine "
                "similarity (score = 1 - cosine distance), which ranks unit-length vectors as inner "
                "product and l2 do",
            )
        )
    entries += [
        _text_queries(source),
        ("metadataFilters", source.metadata_kind != "none", _metadata_detail(source)),
        _doc_ids(source),
        ("mmr", True, "MMR reads the rows' vectors"),
        ("rerank", True, "rerankers read the rows' content"),
        _hybrid(source),
        _cache(source),
        ("writes", not source.read_only, _writes_detail(source)),
    ]
    return [
        {"feature": name, "supported": supported, "detail": detail} for name, supported, detail in entries
    ]


def _vector_search(source: AttachedSource, exact_max_rows: int) -> Feature:
    if source.vector_index is not None:
        return (
            "vectorSearch",
            True,
            f"HNSW index {source.vector_index} serves cosine distance: approximate top-k with iterative "
            "scans; a selective filter is answered by an exact scan, as for the service's own stores",
        )
    return (
        "vectorSearch",
        True,
        f"{no_index_reason(source)}: every search is an exact scan of the matching rows, capped at "
        f"{exact_max_rows:,} rows (EXACT_SEARCH_MAX_ROWS); a search matching more is refused (409 "
        "exact_scan_refused). Create an HNSW index with vector_cosine_ops, then POST .../refresh",
    )


def _text_queries(source: AttachedSource) -> Feature:
    return (
        "textQueries",
        source.accepts_text_queries,
        f"queries are embedded with {source.embedding_model} ({source.dimension} dimensions), as the rows"
        if source.accepts_text_queries
        else f"the rows' {source.dimension}-dimensional vectors were made by {source.embedding_model}, "
        "not this service's model: only precomputed vectors (POST /chunks/similarity-search); "
        "retrieve answers 409 vector_queries_only",
    )


def _metadata_detail(source: AttachedSource) -> str:
    columns = source.columns
    return {
        "jsonb": (
            f"on the jsonb column {columns.metadata}, through GIN index {source.metadata_index}"
            if source.metadata_index
            else f"on the jsonb column {columns.metadata}; no GIN index: a filter is checked row by row"
        ),
        "json": f"{columns.metadata} is json, cast to jsonb per row: filters are checked row by row",
        "columns": f"the columns {', '.join(columns.metadata_columns)} are the metadata keys; filters "
        "are checked row by row (no index)",
        "none": "no metadata is mapped: results carry none, and a metadata filter matches no row",
    }[source.metadata_kind]


def _doc_ids(source: AttachedSource) -> Feature:
    columns = source.columns
    return (
        "docIds",
        True,
        f"docIds match the column {columns.document_id}"
        if columns.document_id
        else f"no document id column is mapped: docIds match the row id ({columns.id})",
    )


def _hybrid(source: AttachedSource) -> Feature:
    fulltext = source.columns.fulltext
    return (
        "hybrid",
        fulltext is not None,
        f"keywords match the tsvector column {fulltext} ({source.text_search}), ranked by ts_rank_cd (no "
        "BM25: the service does not write the table, so it keeps no term statistics), in hybrid and "
        "keyword search"
        + (
            f", through GIN index {source.fulltext_index}"
            if source.fulltext_index
            else ", without a GIN index"
        )
        if fulltext is not None
        else "no full-text column: hybrid and keyword search (searchMode, useHybrid) answer 422. Map a "
        "tsvector column as columns.fulltext, or attach with addFulltext (--add-fulltext), which adds one "
        "to the table",
    )


def _cache(source: AttachedSource) -> Feature:
    return (
        "cache",
        True,
        "cached answers are keyed by the store's version; the service does not see writes to the "
        "table by others, so after one, POST /api/v1/stores/{store}/refresh (or wait for the cache TTL)"
        + ("; its own writes retire cached answers at once" if not source.read_only else ""),
    )


def _writes_detail(source: AttachedSource) -> str:
    if source.read_only:
        return "read-only: the documents API answers 409 read_only_store; the table's own writer fills it"
    columns = source.columns
    document = (
        f"the column {columns.document_id}"
        if columns.document_id
        else f"the key {columns.document_key} of {columns.metadata}"
    )
    ids = {
        "default": f"the table's default fills {columns.id}",
        "text": f"{columns.id} is documentId#chunkIndex",
        "uuid": f"{columns.id} is a uuid5 of documentId#chunkIndex",
    }[source.id_fill]
    return (
        "writable: PUT and DELETE of a document replace or delete its rows (by "
        f"{document}) in one transaction, one row per chunk; {ids}"
    )


def describe(source: AttachedSource) -> dict[str, Any]:
    """The source as GET /stores/{store} shows it (camelCase)."""
    columns = source.columns
    mapped: dict[str, Any] = {"id": columns.id, "content": columns.content, "embedding": columns.embedding}
    if columns.metadata is not None or columns.metadata_columns:
        mapped["metadata"] = (
            columns.metadata if columns.metadata is not None else list(columns.metadata_columns)
        )
    if columns.document_id:
        mapped["documentId"] = columns.document_id
    if columns.title:
        mapped["title"] = columns.title
    if columns.fulltext:
        mapped["fulltext"] = columns.fulltext
    shown: dict[str, Any] = {
        "table": relation_name(source),
        "kind": source.relation_kind,
        "columns": mapped,
        "distance": source.distance,
        "vectorType": source.vector_type,
        "dimension": source.dimension,
        "embeddingModel": source.embedding_model,
        "vectorIndex": source.vector_index,
        "otherVectorIndexes": list(source.other_vector_indexes),
        "metadataIndex": source.metadata_index,
        "textSearch": source.text_search,
        "fulltextIndex": source.fulltext_index,
        "rows": source.rows,
        "inspectedAt": source.inspected_at,
        "readOnly": source.read_only,
    }
    if columns.document_key is not None:
        shown["documentKey"] = columns.document_key
    if source.preset is not None:
        shown["preset"] = source.preset
    if source.collection is not None:
        shown["collection"] = source.collection
    return shown
