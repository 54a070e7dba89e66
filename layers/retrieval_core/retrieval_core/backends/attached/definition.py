"""How an attached store is asked for: a table or view the service reads but does not own. Pure.

A caller's `source` block (`SourceRequest`, after presets are expanded) names a relation and maps its
columns; `attached.catalog` checks it against the catalog and records what it found as an `AttachedSource`
(db/attached_source.py), kept as JSON in `stores.source`. Names here are only ever compared with the
catalog as values and then quoted as identifiers (`attached.search`): never interpolated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from retrieval_core.db.attached_source import AttachedSource, ColumnMap, Distance, Preset
from retrieval_core.exceptions import InvalidRequestError

# PostgreSQL truncates longer identifiers; a longer name can only be a mistake (or an attack).
MAX_IDENTIFIER_BYTES = 63
MAX_METADATA_COLUMNS = 64


@dataclass(frozen=True, slots=True)
class SourceRequest:
    """A `source` block as asked, presets expanded; not yet checked against the catalog."""

    schema: str
    table: str
    columns: ColumnMap
    distance: Distance = "cosine"
    dimension: int | None = None  # only needed for an untyped vector column of an empty table
    embedding_model: str | None = None  # None: assumed to be the service's when the dimension matches
    preset: Preset | None = None
    collection: str | None = None  # langchain-postgres: rows of this collection only
    # The text search configuration the fulltext column was made with (queries must use the same).
    text_search: str = "english"
    # Add a generated tsvector column and its GIN index to the table (explicitly asked: it alters it).
    add_fulltext: bool = False
    # The documents API writes the table's rows (checked against the catalog when attached).
    writable: bool = False


def same_request(source: AttachedSource, request: SourceRequest) -> bool:
    """Whether `request` asks for `source` as it is attached (PUT again: nothing to do)."""
    mine = SourceRequest(
        source.schema,
        source.table,
        source.columns,
        source.distance,
        request.dimension if request.dimension in (None, source.dimension) else source.dimension,
        request.embedding_model
        if request.embedding_model in (None, source.embedding_model)
        else source.embedding_model,
        source.preset,
        source.collection,
        source.text_search,
        request.add_fulltext,
        not source.read_only,
    )
    # A column added by an earlier attach with add_fulltext is in the mapping now.
    asked = (
        request
        if request.columns.fulltext or not request.add_fulltext
        else replace(request, columns=replace(request.columns, fulltext=source.columns.fulltext))
    )
    return mine == asked


# Preset layouts, as the libraries create them (see docs/existing-tables.md for the DDL they run).
_LANGCHAIN_V1 = ColumnMap(id="id", content="document", embedding="embedding", metadata="cmetadata")
_LANGCHAIN_V2 = ColumnMap(
    id="langchain_id", content="content", embedding="embedding", metadata="langchain_metadata"
)
_LLAMAINDEX = ColumnMap(id="node_id", content="text", embedding="embedding", metadata="metadata_")
# Where a writable preset keeps a document's id in its metadata: LlamaIndex's own key (its
# delete(ref_doc_id) and filters read it); langchain-postgres has no notion of a document, so a key no
# caller may set (prepare.check_metadata reserves it).
PRESET_DOCUMENT_KEYS: dict[Preset, str] = {
    "langchain-postgres": "documentId",
    "langchain-postgres-v2": "documentId",
    "llamaindex": "ref_doc_id",
}
LANGCHAIN_V1_TABLE = "langchain_pg_embedding"
LANGCHAIN_V1_COLLECTIONS = "langchain_pg_collection"


def source_request(
    table: str | None,
    columns: dict[str, Any] | None,
    *,
    schema: str | None = None,
    distance: Distance = "cosine",
    dimension: int | None = None,
    embedding_model: str | None = None,
    preset: Preset | None = None,
    collection: str | None = None,
    text_search: str = "english",
    add_fulltext: bool = False,
    writable: bool = False,
) -> SourceRequest:
    """The SourceRequest of a `source` block; a 422 naming the field for anything missing or malformed.

    `table` is `schema.table` (split at the first dot) or a bare name in `schema` (default public).
    A preset fills in the table and columns of its library's layout; `columns` given beside a preset
    override its names (a v2 table created with other column names). `writable`: a preset keeps the
    document id in its metadata, under the key its library reads (PRESET_DOCUMENT_KEYS).
    """
    defaults: ColumnMap | None = None
    if preset == "langchain-postgres":
        if not collection:
            raise _invalid("source.collection", "the langchain-postgres preset needs the collection's name")
        if table is not None and table.rpartition(".")[2] != LANGCHAIN_V1_TABLE:
            raise _invalid("source.table", f"the langchain-postgres preset reads {LANGCHAIN_V1_TABLE}")
        table = table or LANGCHAIN_V1_TABLE
        defaults = _LANGCHAIN_V1
    elif collection is not None:
        raise _invalid("source.collection", "only the langchain-postgres preset has collections")
    elif preset == "langchain-postgres-v2":
        defaults = _LANGCHAIN_V2
    elif preset == "llamaindex":
        defaults = _LLAMAINDEX
    if not table:
        raise _invalid("source.table", "name the table or view (schema.table)")
    document_key = PRESET_DOCUMENT_KEYS[preset] if writable and preset else None
    if schema is None:
        schema, dot, name = table.partition(".")
        if not dot:
            schema, name = "public", table
    else:
        name = table
    for where, value in (("source.table", schema), ("source.table", name)):
        _check_identifier(where, value)
    return SourceRequest(
        schema=schema,
        table=name,
        columns=_column_map(columns or {}, defaults, document_key),
        distance=distance,
        dimension=dimension,
        embedding_model=embedding_model,
        preset=preset,
        collection=collection,
        text_search=text_search,
        add_fulltext=add_fulltext,
        writable=writable,
    )


def _column_map(given: dict[str, Any], defaults: ColumnMap | None, document_key: str | None) -> ColumnMap:
    metadata = given.get("metadata", defaults.metadata if defaults else None)
    metadata_column, metadata_columns = (
        (None, tuple(metadata)) if isinstance(metadata, list) else (metadata, ())
    )
    if len(metadata_columns) > MAX_METADATA_COLUMNS:
        raise _invalid("source.columns.metadata", f"at most {MAX_METADATA_COLUMNS} columns")
    values: dict[str, Any] = {
        "id": given.get("id", defaults.id if defaults else None),
        "content": given.get("content", defaults.content if defaults else None),
        "embedding": given.get("embedding", defaults.embedding if defaults else None),
        "metadata": metadata_column,
        "metadata_columns": metadata_columns,
        "document_id": given.get("documentId"),
        "title": given.get("title"),
        "fulltext": given.get("fulltext", defaults.fulltext if defaults else None),
        "document_key": document_key if given.get("documentId") is None else None,
    }
    for role in ("id", "content", "embedding"):
        if values[role] is None:
            raise _invalid(f"source.columns.{role}", "required: the column that holds it")
    mapped = ColumnMap(**values)
    for role, name in mapped.names():
        _check_identifier(f"source.columns.{role}", name)
    if len(set(metadata_columns)) != len(metadata_columns):
        raise _invalid("source.columns.metadata", "a column is listed twice")
    return mapped


def _check_identifier(where: str, name: str) -> None:
    # Only what cannot name anything: the catalog decides the rest.
    if not name or "\x00" in name or len(name.encode("utf-8")) > MAX_IDENTIFIER_BYTES:
        raise _invalid(where, f"not a PostgreSQL identifier (1 to {MAX_IDENTIFIER_BYTES} bytes, no NUL)")


def _invalid(where: str, message: str) -> InvalidRequestError:
    return InvalidRequestError.for_field(where, message, "invalid_source")
