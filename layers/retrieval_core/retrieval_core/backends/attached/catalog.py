"""Check a `source` against the catalog and find what the relation supports.

Every name the caller sends is looked up as a value (pg_class, pg_attribute); only names the catalog
returned are then quoted into SQL, as identifiers. Whether an index serves cosine ordering is not
guessed from its definition: the planner is asked (EXPLAIN), with the search's own settings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from retrieval_core.backends.attached.definition import LANGCHAIN_V1_COLLECTIONS, SourceRequest
from retrieval_core.backends.attached.exceptions import UnusableSourceError
from retrieval_core.backends.attached.search import query_vector, relation, relation_params
from retrieval_core.backends.attached.writes import check_writable
from retrieval_core.db.attached_source import AttachedSource, MetadataKind, RowScope, VectorType
from retrieval_core.db.connection import Connection
from retrieval_core.db.migrations.steps import MIGRATIONS
from retrieval_core.db.stores import text_search_config
from retrieval_core.db.vectors import Vector
from retrieval_core.exceptions import InvalidRequestError

_KINDS = {"r": "table", "v": "view", "m": "materialized view", "p": "partitioned table", "f": "foreign table"}
_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")
# The service's own tables: attaching one would read every store's rows past the grants.
OWN_TABLES = frozenset(
    {"schema_migrations", *(m for _, _, ddl in MIGRATIONS for m in re.findall(r"CREATE TABLE (\w+)", ddl))}
)
_TEXT_TYPES = ("text", "character varying", "character")
_VECTOR_TYPES: tuple[VectorType, ...] = ("vector", "halfvec")


def inspect_source(
    conn: Connection, request: SourceRequest, service_model: str, service_dimension: int
) -> AttachedSource:
    """The AttachedSource of `request`: its relation and columns found and typed, its dimension, scope and
    indexes known. UnusableSourceError (422, naming the field) when the catalog disagrees."""
    oid, kind = _relation(conn, request.schema, request.table)
    text_search = text_search_config(conn, request.text_search) or "english"
    if request.add_fulltext:
        request = add_fulltext(conn, request, oid, kind, text_search)
    types = _column_types(conn, oid)
    for role, name in request.columns.names():
        if name not in types:
            raise _unusable(
                f"source.columns.{role}", f"{request.schema}.{request.table} has no column '{name}'"
            )
    vector_type, typmod = _embedding_type(request, types)
    content_type = types[request.columns.content][0]
    if content_type not in _TEXT_TYPES:
        raise _unusable("source.columns.content", f"'{request.columns.content}' is {content_type}, not text")
    if request.columns.title and types[request.columns.title][0] not in _TEXT_TYPES:
        raise _unusable("source.columns.title", f"'{request.columns.title}' is not text")
    metadata_kind = _metadata_kind(request, types)
    if request.columns.fulltext and types[request.columns.fulltext][0] != "tsvector":
        raise _unusable("source.columns.fulltext", f"'{request.columns.fulltext}' is not a tsvector")
    scope = _scope(conn, request)
    draft = AttachedSource(
        schema=request.schema,
        table=request.table,
        relation_kind=_KINDS[kind],
        columns=request.columns,
        distance=request.distance,
        vector_type=vector_type,
        dimension=typmod or request.dimension or 0,
        embedding_cast=False,
        metadata_kind=metadata_kind,
        embedding_model="",
        accepts_text_queries=False,
        scope=scope,
        preset=request.preset,
        collection=request.collection,
        text_search=text_search,
    )
    if typmod is None:
        draft = replace(draft, dimension=_stored_dimension(conn, draft, request.dimension))
    model = request.embedding_model or (service_model if draft.dimension == service_dimension else "unknown")
    draft = replace(
        draft,
        embedding_model=model,
        accepts_text_queries=draft.dimension == service_dimension and model == service_model,
    )
    inspected = inspect_indexes(conn, draft, oid)
    return check_writable(conn, inspected, oid, kind) if request.writable else inspected


def inspect_indexes(conn: Connection, source: AttachedSource, oid: int, count: bool = True) -> AttachedSource:
    """`source` with its serving HNSW index, its other vector indexes, its metadata index and row count
    (without `count`, the count it had: a search's inspection does not read the whole table)."""
    types = _column_types(conn, oid)
    for role, name in source.columns.names():
        if name not in types:
            raise _unusable(
                f"source.columns.{role}", f"{source.schema}.{source.table} has no column '{name}' now"
            )
    untyped = types[source.columns.embedding][1] <= 0
    serving, cast = None, False
    for candidate in (False, True) if untyped else (False,):
        serving = serving_index(conn, replace(source, embedding_cast=candidate))
        if serving is not None:
            cast = candidate
            break
    vector_indexes = _vector_indexes(conn, oid, source.columns.embedding)
    others = tuple(f"{name} ({opclass})" for name, am, opclass in vector_indexes if name != serving)
    checked = replace(source, embedding_cast=cast, vector_index=serving, other_vector_indexes=others)
    return replace(
        checked,
        metadata_index=_gin_index(conn, oid, source.columns.metadata)
        if source.metadata_kind == "jsonb"
        else None,
        fulltext_index=_gin_index(conn, oid, source.columns.fulltext) if source.columns.fulltext else None,
        rows=_count(conn, checked) if count else source.rows,
        inspected_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    )


# The column `add_fulltext` adds: its name says who added it.
FULLTEXT_COLUMN = "retrieval_tsv"


def add_fulltext(
    conn: Connection, request: SourceRequest, oid: int, kind: str, text_search: str
) -> SourceRequest:
    """Add a generated tsvector column of the content (and its GIN index) to the table, as explicitly asked.

    It alters the user's table: PostgreSQL rewrites it, holding an exclusive lock meanwhile. Done again
    (the column is there), it adds nothing. A view cannot take a column: 422.
    """
    if request.columns.fulltext is not None:
        raise _unusable("source.addFulltext", "give either columns.fulltext or addFulltext, not both")
    if kind not in ("r", "p"):
        raise _unusable(
            "source.addFulltext",
            f"{request.schema}.{request.table} is a {_KINDS[kind]}: add the column to its table",
        )
    owner = conn.execute(
        "SELECT pg_has_role(relowner, 'USAGE') FROM pg_class WHERE oid = %s", (oid,)
    ).fetchone()
    if not (owner and owner[0]):
        raise _unusable(
            "source.addFulltext",
            f"the service's database user does not own {request.schema}.{request.table}: add the column "
            "as its owner (docs/existing-tables.md) and map it as columns.fulltext",
        )
    types = _column_types(conn, oid)
    if request.columns.content not in types:
        raise _unusable(
            "source.columns.content",
            f"{request.schema}.{request.table} has no column '{request.columns.content}'",
        )
    table = sql.SQL("{}.{}").format(sql.Identifier(request.schema), sql.Identifier(request.table))
    if FULLTEXT_COLUMN not in types:
        # The configuration is a catalog name (text_search_config), made a literal: a generated column's
        # expression cannot take parameters.
        conn.execute(
            sql.SQL(
                "ALTER TABLE {table} ADD COLUMN {column} tsvector GENERATED ALWAYS AS"
                " (to_tsvector({config}::regconfig, coalesce({content}::text, ''))) STORED"
            ).format(
                table=table,
                column=sql.Identifier(FULLTEXT_COLUMN),
                config=sql.Literal(text_search),
                content=sql.Identifier(request.columns.content),
            )
        )
    elif types[FULLTEXT_COLUMN][0] != "tsvector":
        raise _unusable(
            "source.addFulltext", f"the table has a column {FULLTEXT_COLUMN} that is not a tsvector"
        )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {index} ON {table} USING gin ({column})").format(
            index=sql.Identifier(f"{request.table[:40]}_{FULLTEXT_COLUMN}_gin"),
            table=table,
            column=sql.Identifier(FULLTEXT_COLUMN),
        )
    )
    return replace(request, columns=replace(request.columns, fulltext=FULLTEXT_COLUMN))


def relation_oid(conn: Connection, source: AttachedSource) -> int:
    """The oid of the source's relation (UnusableSourceError when it is gone)."""
    return _relation(conn, source.schema, source.table)[0]


def serving_index(conn: Connection, source: AttachedSource) -> str | None:
    """The HNSW index the planner uses for the source's cosine top-k, or None (asked with EXPLAIN)."""
    probe = [1.0] + [0.0] * (source.dimension - 1)
    # As the search runs it: sequential scans off, so the index is chosen whenever it can serve.
    before = conn.execute(
        "SELECT current_setting('enable_seqscan'), set_config('enable_seqscan', 'off', true)"
    )
    setting = before.fetchone()
    plan = conn.execute(
        sql.SQL(
            "EXPLAIN (FORMAT JSON) SELECT id FROM {relation} ORDER BY embedding <=> {query} LIMIT 10"
        ).format(relation=relation(source), query=query_vector(source)),
        {**relation_params(source), "query_vector": Vector(probe)},
    ).fetchone()
    conn.execute("SELECT set_config('enable_seqscan', %s, true)", (setting[0] if setting else "on",))
    assert plan is not None
    document = plan[0] if not isinstance(plan[0], str) else json.loads(plan[0])
    for node in _nodes(document[0]["Plan"]):
        if node.get("Node Type") in ("Index Scan", "Index Only Scan") and node.get("Order By"):
            name = str(node["Index Name"])
            if _access_method(conn, node.get("Schema"), name) == "hnsw":
                return name
    return None


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _access_method(conn: Connection, schema: str | None, index: str) -> str | None:
    row = conn.execute(
        """SELECT am.amname FROM pg_class i JOIN pg_am am ON am.oid = i.relam
           JOIN pg_namespace n ON n.oid = i.relnamespace
           WHERE i.relname = %s AND (%s::text IS NULL OR n.nspname = %s) AND i.relkind = 'i'
           ORDER BY pg_table_is_visible(i.oid) DESC LIMIT 1""",
        (index, schema, schema),
    ).fetchone()
    return str(row[0]) if row else None


def _relation(conn: Connection, schema: str, table: str) -> tuple[int, str]:
    where = "source.table"
    if schema in _SYSTEM_SCHEMAS or schema.startswith("pg_"):
        raise _unusable(where, f"{schema}.{table} is a system relation; attach a table of your own")
    row = conn.execute(
        """SELECT c.oid, c.relkind, has_table_privilege(c.oid, 'SELECT'),
                  c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = to_regclass('stores'))
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'v', 'm', 'p', 'f')""",
        (schema, table),
    ).fetchone()
    if row is None:
        raise _unusable(
            where, f"no table or view {schema}.{table} in this database (names are case-sensitive)"
        )
    oid, kind, readable, ours = row
    if ours and table in OWN_TABLES:
        raise _unusable(where, f"{schema}.{table} is one of the service's own tables")
    if not readable:
        raise _unusable(where, f"the service's database user may not SELECT from {schema}.{table}")
    return int(oid), str(kind)


def _column_types(conn: Connection, oid: int) -> dict[str, tuple[str, int]]:
    """column -> (type name, typmod)."""
    rows = conn.execute(
        """SELECT a.attname, t.typname, format_type(a.atttypid, NULL), a.atttypmod
           FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
           WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped""",
        (oid,),
    ).fetchall()
    # pgvector's types by their type name (vector, halfvec), the rest by their SQL name (text, jsonb, ...).
    return {str(r[0]): (str(r[1]) if r[1] in _VECTOR_TYPES else str(r[2]), int(r[3])) for r in rows}


def _embedding_type(
    request: SourceRequest, types: dict[str, tuple[str, int]]
) -> tuple[VectorType, int | None]:
    name = request.columns.embedding
    type_name, typmod = types[name]
    if type_name not in _VECTOR_TYPES:
        raise _unusable(
            "source.columns.embedding",
            f"'{name}' is {type_name}; the embedding must be a pgvector vector or halfvec",
        )
    vector_type: VectorType = "halfvec" if type_name == "halfvec" else "vector"
    if typmod > 0 and request.dimension is not None and request.dimension != typmod:
        raise _unusable(
            "source.dimension", f"'{name}' is {type_name}({typmod}), not {request.dimension} dimensions"
        )
    return vector_type, typmod if typmod > 0 else None


def _metadata_kind(request: SourceRequest, types: dict[str, tuple[str, int]]) -> MetadataKind:
    columns = request.columns
    if columns.metadata is not None:
        type_name = types[columns.metadata][0]
        if type_name not in ("jsonb", "json"):
            raise _unusable(
                "source.columns.metadata",
                f"'{columns.metadata}' is {type_name}; a metadata column must be json or jsonb "
                '(or list plain columns: "metadata": ["year", "team"])',
            )
        return "jsonb" if type_name == "jsonb" else "json"
    for name in columns.metadata_columns:
        if types[name][0] in _VECTOR_TYPES:
            raise _unusable("source.columns.metadata", f"'{name}' is a vector; metadata columns hold values")
    return "columns" if columns.metadata_columns else "none"


def _scope(conn: Connection, request: SourceRequest) -> RowScope | None:
    if request.preset != "langchain-postgres":
        return None
    oid, _ = _relation(conn, request.schema, LANGCHAIN_V1_COLLECTIONS)
    if {"uuid", "name"} - set(_column_types(conn, oid)):
        raise _unusable(
            "source.table", f"{request.schema}.{LANGCHAIN_V1_COLLECTIONS} has no uuid and name columns"
        )
    row = conn.execute(
        sql.SQL("SELECT uuid::text FROM {}.{} WHERE name = %s").format(
            sql.Identifier(request.schema), sql.Identifier(LANGCHAIN_V1_COLLECTIONS)
        ),
        (request.collection,),
    ).fetchone()
    if row is None:
        raise _unusable("source.collection", f"no langchain-postgres collection named '{request.collection}'")
    return RowScope("collection_id", str(row[0]))


def _stored_dimension(conn: Connection, source: AttachedSource, declared: int | None) -> int:
    """The dimension of an untyped vector column: declared, else read from a row."""
    row = conn.execute(
        sql.SQL("SELECT vector_dims(embedding) FROM {} WHERE embedding IS NOT NULL LIMIT 1").format(
            relation(source)
        ),
        relation_params(source),
    ).fetchone()
    found = int(row[0]) if row else None
    if declared is not None and found is not None and declared != found:
        raise _unusable("source.dimension", f"its rows hold {found}-dimensional vectors, not {declared}")
    dimension = declared or found
    if dimension is None:
        raise _unusable(
            "source.dimension", 'the vector column has no dimension and no rows: give "dimension"'
        )
    return dimension


def _vector_indexes(conn: Connection, oid: int, column: str) -> list[tuple[str, str, str]]:
    """(index, access method, operator class) of the HNSW and IVFFlat indexes on the relation's `column`."""
    rows = conn.execute(
        """SELECT i.relname, am.amname, opc.opcname
           FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am am ON am.oid = i.relam
           JOIN pg_opclass opc ON opc.oid = x.indclass[0]
           WHERE x.indrelid = %s AND am.amname IN ('hnsw', 'ivfflat')
             AND (pg_get_indexdef(x.indexrelid, 1, true) = quote_ident(%s)
                  OR pg_get_indexdef(x.indexrelid, 1, true) LIKE '(' || quote_ident(%s) || '::%%')
           ORDER BY i.relname""",
        (oid, column, column),
    ).fetchall()
    return [(str(r[0]), str(r[1]), str(r[2])) for r in rows]


def _gin_index(conn: Connection, oid: int, column: str | None) -> str | None:
    row = conn.execute(
        """SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
           JOIN pg_am am ON am.oid = i.relam
           WHERE x.indrelid = %s AND am.amname = 'gin' AND x.indnatts = 1
             AND pg_get_indexdef(x.indexrelid, 1, true) = quote_ident(%s) AND x.indpred IS NULL
           ORDER BY i.relname LIMIT 1""",
        (oid, column),
    ).fetchone()
    return str(row[0]) if row else None


def _count(conn: Connection, source: AttachedSource) -> int:
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(relation(source)), relation_params(source)
    ).fetchone()
    return int(row[0]) if row else 0


def _unusable(field: str, message: str) -> InvalidRequestError:
    return UnusableSourceError.for_field(field, message, "unusable_source")
