"""Search an attached store: the checks, then its HNSW index or a capped exact scan."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from psycopg import errors

from retrieval_core.backends.attached.exceptions import (
    ExactScanRefusedError,
    SourceUnavailableError,
    VectorQueriesOnlyError,
)
from retrieval_core.backends.attached.features import no_index_reason, relation_name
from retrieval_core.backends.attached.live import LiveSources
from retrieval_core.backends.attached.search import count_matching, hybrid, keyword_only, nearest
from retrieval_core.db.attached_source import AttachedSource
from retrieval_core.db.connection import Connection
from retrieval_core.db.scored_chunk import ScoredChunk
from retrieval_core.db.stores import Store
from retrieval_core.exceptions import DimensionMismatchError, InvalidRequestError
from retrieval_core.filters.predicate import Predicate
from retrieval_core.search.plan import FilterSizes, exact_scan_limit


def search_attached(
    conn: Connection,
    store: Store,
    vector: Sequence[float] | None,
    limit: int,
    where: Predicate,
    *,
    embedded_by: str | None,
    query_text: str | None,
    with_embeddings: bool,
    filter_sizes: FilterSizes,
    exact_max_rows: int,
    live: LiveSources,
) -> list[ScoredChunk]:
    """The `limit` rows of the store's relation nearest to `vector` that satisfy `where`, nearest first;
    with `query_text`, joined by the best keyword matches of its fulltext column (hybrid). No `vector`:
    the best keyword matches of `query_text` alone (none without it), best first.

    `embedded_by`: the model that embedded a text query (None for a caller's own vector). Run in the
    search transaction, whose options are set. A table that changed under the store: SourceUnavailableError.
    Its indexes are those `live` saw at most ATTACHED_INSPECTION_TTL_S ago, not only at attach time.
    """
    assert store.source is not None
    source = live.current(conn, store)
    if (query_text is not None or vector is None) and source.columns.fulltext is None:
        raise InvalidRequestError.for_field(
            "useHybrid" if vector is not None else "searchMode",
            f"store '{store.name}' is attached to a table without a full-text column, so it has no keyword "
            'search (searchMode "hybrid" or "keyword", useHybrid): map a tsvector column as '
            "columns.fulltext, or attach with addFulltext (docs/existing-tables.md)",
            "unsupported",
        )
    relation = relation_name(source)
    if vector is None:
        if query_text is None:
            return []
        with _source_errors(store, relation):
            return keyword_only(conn, source, query_text, limit, where)
    if embedded_by is not None and not source.accepts_text_queries:
        raise VectorQueriesOnlyError(
            store.name, source.dimension, source.embedding_model, embedded_by, len(vector)
        )
    if len(vector) != source.dimension:
        raise DimensionMismatchError(store.name, source.dimension, len(vector), "query")
    with _source_errors(store, relation):
        exact = _scans_exactly(conn, store, source, where, limit, filter_sizes, exact_max_rows)
        if query_text is not None:
            return hybrid(conn, source, vector, query_text, limit, where, exact, with_embeddings)
        return nearest(conn, source, vector, limit, where, exact, with_embeddings)


@contextmanager
def _source_errors(store: Store, relation: str) -> Iterator[None]:
    # The table is not ours: it may have changed since it was attached. Said so, not as a database outage.
    try:
        yield
    except (errors.UndefinedTable, errors.UndefinedColumn, errors.UndefinedObject) as exc:
        reason = (
            "no longer exists or lost a mapped column: create it again, or DELETE the store and attach again"
        )
        raise SourceUnavailableError(store.name, relation, reason) from exc
    except errors.InsufficientPrivilege as exc:
        reason = "the service's database user may no longer SELECT from"
        raise SourceUnavailableError(store.name, relation, reason) from exc
    except errors.DataError as exc:
        reason = (
            "holds a value the mapping cannot read (such as a vector of another dimension in an untyped "
            f"column, SQLSTATE {exc.sqlstate})"
        )
        raise SourceUnavailableError(store.name, relation, reason) from exc


def _scans_exactly(
    conn: Connection,
    store: Store,
    source: AttachedSource,
    where: Predicate,
    limit: int,
    filter_sizes: FilterSizes,
    exact_max_rows: int,
) -> bool:
    """True for an exact scan. Without a serving index, always, if no more than `exact_max_rows` rows match
    (ExactScanRefusedError otherwise); with one, as for our own stores (search_plan.py)."""
    key = (store.id, store.version, where.sql, json.dumps(where.params, sort_keys=True, default=str))

    def count(up_to: int) -> int:
        return count_matching(conn, source, where, up_to)

    if source.vector_index is None:
        if exact_max_rows <= 0 or not filter_sizes.at_most(key, exact_max_rows, count):
            raise ExactScanRefusedError(store.name, exact_max_rows, no_index_reason(source))
        return True
    if not where.sql:
        return False
    most = exact_scan_limit(source.rows, limit, exact_max_rows)
    return most > 0 and filter_sizes.at_most(key, most, count)
