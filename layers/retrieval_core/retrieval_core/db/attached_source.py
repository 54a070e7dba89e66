"""What `stores.source` holds for an attached store: a table or view the service reads but does not own,
as validated against the catalog. Pure: no database client.

The request side (a caller's `source` block, presets, validation) is `backends/attached/definition.py`;
this is the stored side, which `db/stores.py` reads with each store's row.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Literal, get_args

Distance = Literal["cosine", "l2", "inner_product"]
DISTANCES: tuple[Distance, ...] = get_args(Distance)
Preset = Literal["langchain-postgres", "langchain-postgres-v2", "llamaindex"]
PRESETS: tuple[Preset, ...] = get_args(Preset)
VectorType = Literal["vector", "halfvec"]
# How metadata reaches results: a jsonb column as it is, a json column cast per row, plain columns
# gathered into an object per row, or none at all.
MetadataKind = Literal["jsonb", "json", "columns", "none"]
# How a writable store fills the id column of the rows it writes: the column's own default (serial,
# identity, gen_random_uuid()), `{documentId}#{chunkIndex}` for a text column, or a uuid5 of that text.
IdFill = Literal["default", "text", "uuid"]


@dataclass(frozen=True, slots=True)
class ColumnMap:
    """Which column holds what. Only `id`, `content` and `embedding` are required."""

    id: str
    content: str
    embedding: str
    metadata: str | None = None  # a json or jsonb column
    metadata_columns: tuple[str, ...] = ()  # plain columns, each exposed as a metadata key of its name
    document_id: str | None = None
    title: str | None = None
    fulltext: str | None = None  # a tsvector column: keyword and hybrid search (ts_rank_cd)
    # A writable preset keeps the document id in this key of the metadata column (no column of its own).
    document_key: str | None = None

    def names(self) -> list[tuple[str, str]]:
        """(role, column) of every mapped column."""
        pairs = [("id", self.id), ("content", self.content), ("embedding", self.embedding)]
        pairs += [(role, name) for role, name in self._optional() if name is not None]
        pairs += [("metadata", name) for name in self.metadata_columns]
        return pairs

    def _optional(self) -> list[tuple[str, str | None]]:
        return [
            ("metadata", self.metadata),
            ("documentId", self.document_id),
            ("title", self.title),
            ("fulltext", self.fulltext),
        ]


@dataclass(frozen=True, slots=True)
class RowScope:
    """Only rows whose `column` equals `value` belong to the store (a langchain-postgres collection)."""

    column: str
    value: str


@dataclass(frozen=True, slots=True)
class AttachedSource:
    """A source as validated against the catalog: how to read it, and what it supports.

    Hashable (frozen, tuples only), since queries are composed once per store and filter shape.
    """

    schema: str
    table: str
    relation_kind: str  # table, view, materialized view, partitioned table, foreign table
    columns: ColumnMap
    distance: Distance
    vector_type: VectorType
    dimension: int
    # The untyped vector column is read as column::vector(dimension), the expression its index is on.
    embedding_cast: bool
    metadata_kind: MetadataKind
    embedding_model: str
    accepts_text_queries: bool  # False: the vectors were made by another model; vector queries only
    scope: RowScope | None = None
    preset: Preset | None = None
    collection: str | None = None
    vector_index: str | None = None  # the HNSW index that serves cosine ordering (found with EXPLAIN)
    other_vector_indexes: tuple[str, ...] = ()  # vector indexes that cannot serve it (other operator)
    metadata_index: str | None = None  # a GIN index on the metadata column
    rows: int = 0  # rows of the store when it was inspected
    inspected_at: str = ""
    read_only: bool = True
    text_search: str = "english"
    fulltext_index: str | None = None  # a GIN index on the fulltext column
    id_fill: IdFill = "default"  # writable stores only: how the id column of a written row is filled

    def to_json(self) -> dict[str, Any]:
        """As stored in `stores.source`."""
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> AttachedSource:
        """From `stores.source`. Keys this code does not know (written by a newer version) are skipped, so a
        rolled-back deploy still reads the stores a newer one attached."""
        known = {f.name for f in fields(cls)}
        columns = {k: v for k, v in value["columns"].items() if k in {f.name for f in fields(ColumnMap)}}
        columns["metadata_columns"] = tuple(columns.get("metadata_columns") or ())
        scope = value.get("scope")
        return cls(
            **{
                **{k: v for k, v in value.items() if k in known},
                "columns": ColumnMap(**columns),
                "scope": RowScope(**scope) if scope else None,
                "other_vector_indexes": tuple(value.get("other_vector_indexes") or ()),
            }
        )
