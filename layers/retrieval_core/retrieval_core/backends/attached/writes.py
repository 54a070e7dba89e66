"""Writable attached stores: what the catalog must allow, and the rows a document becomes.

Opt-in only (`source.writable`). A document is replaced in its caller's transaction: its rows are deleted
by the document id (a mapped column, or a preset's metadata key), then one row per chunk is inserted
through the mapped columns. Rows go in as one jsonb array read by `jsonb_populate_recordset` with the
table's own row type, so PostgreSQL converts each value to its column's type (text, uuid, integer, json,
vector, halfvec) and nothing is formatted into SQL but catalog-checked identifiers. The table itself is
never altered.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from retrieval_core.backends.attached.exceptions import UnusableSourceError
from retrieval_core.db.attached_source import AttachedSource, IdFill
from retrieval_core.db.connection import Connection
from retrieval_core.exceptions import InvalidRequestError

_TEXT_TYPES = ("text", "character varying", "character")
# A uuid id is made from `{documentId}#{chunkIndex}` (uuid5), so writing a document again gives its
# rows the same ids.
ID_NAMESPACE = uuid.UUID("9d7f6a52-5d3e-4f0e-9a51-2f0c8b7e1c11")
# LlamaIndex's node_to_metadata_dict writes the document id under these three keys; its readers, filters
# and delete(ref_doc_id) use them.
_LLAMAINDEX_KEYS = ("doc_id", "document_id", "ref_doc_id")


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """One chunk of a document to write: its text, vector, metadata and the document's title."""

    content: str
    embedding: Sequence[float]
    metadata: dict[str, Any]
    title: str


@dataclass(frozen=True, slots=True)
class _Column:
    type_name: str
    not_null: bool
    filled_by_table: bool  # a default, an identity or a generated column
    generated: bool


def check_writable(conn: Connection, source: AttachedSource, oid: int, kind: str) -> AttachedSource:
    """`source` made writable, with how its ids are filled; UnusableSourceError (422, naming the field)
    when the service could not write rows the mapping reads back, or would need to alter the table."""
    where = f"{source.schema}.{source.table}"
    columns = source.columns
    if kind not in ("r", "p"):
        raise _refused("source.writable", f"{where} is not a table: the service writes tables only")
    allowed = conn.execute(
        "SELECT has_table_privilege(%s::oid, 'INSERT'), has_table_privilege(%s::oid, 'DELETE')", (oid, oid)
    ).fetchone()
    if not (allowed and allowed[0] and allowed[1]):
        raise _refused("source.writable", f"the service's database user lacks the privilege to write {where}")
    if not source.accepts_text_queries:
        raise _refused(
            "source.writable",
            f"the table's {source.dimension}-dimensional vectors were made by {source.embedding_model}: rows "
            "the service embedded with its own model could not be searched beside them",
        )
    if columns.document_id is None and columns.document_key is None:
        raise _refused(
            "source.columns.documentId",
            "writes replace and delete a document's rows by its id: map the column that holds it",
        )
    if columns.document_id == columns.id:
        raise _refused(
            "source.columns.documentId",
            "the document id column is the row id: a document of several chunks needs one row id each",
        )
    if source.metadata_kind == "none":
        raise _refused(
            "source.columns.metadata",
            "written documents carry metadata: map a json or jsonb column, or plain columns",
        )
    table = _columns(conn, oid)
    checked = replace(source, read_only=False, id_fill=_id_fill(columns.id, table[columns.id]))
    written = written_columns(checked)
    for name in written:
        if table[name].generated:
            raise _refused("source.writable", f"'{name}' is a generated column: the service cannot write it")
    if columns.fulltext is not None and not table[columns.fulltext].generated:
        raise _refused(
            "source.columns.fulltext",
            f"'{columns.fulltext}' is not a generated column: rows the service writes would have no keywords",
        )
    unfilled = sorted(
        name
        for name, column in table.items()
        if column.not_null and not column.filled_by_table and name not in written and name != columns.id
    )
    if unfilled:
        raise _refused(
            "source.writable",
            f"{where} has NOT NULL columns without a default that the mapping does not fill: "
            f"{', '.join(unfilled)}",
        )
    _check_sequences(conn, oid, [name for name in table if name not in written], where)
    return checked


def _id_fill(name: str, column: _Column) -> IdFill:
    if column.filled_by_table:
        return "default"
    if column.type_name in _TEXT_TYPES:
        return "text"
    if column.type_name == "uuid":
        return "uuid"
    raise _refused(
        "source.columns.id",
        f"'{name}' is {column.type_name} without a default: give it one (an identity, a sequence) or map "
        "a text or uuid id column, which the service fills itself",
    )


def written_columns(source: AttachedSource) -> list[str]:
    """The columns a written row sets, each once (the id only when the table does not fill it)."""
    columns = source.columns
    names = [columns.content, columns.embedding]
    if source.id_fill != "default":
        names.insert(0, columns.id)
    names += [n for n in (columns.document_id, columns.title, columns.metadata) if n is not None]
    names += list(columns.metadata_columns)
    if source.scope is not None:
        names.append(source.scope.column)
    return list(dict.fromkeys(names))


def delete_document(conn: Connection, source: AttachedSource, document_id: str) -> int:
    """Delete the rows of `document_id` (of the store's scope only); how many there were."""
    columns = source.columns
    params: dict[str, Any] = {"document": document_id}
    if columns.document_key is not None:
        assert columns.metadata is not None
        match = sql.SQL("{}::jsonb @> %(contains)s").format(sql.Identifier(columns.metadata))
        params["contains"] = Jsonb({columns.document_key: document_id})
    else:
        assert columns.document_id is not None
        match = sql.SQL("{}::text = %(document)s").format(sql.Identifier(columns.document_id))
    if source.scope is not None:
        match = sql.SQL("{} AND {} = %(scope)s").format(match, sql.Identifier(source.scope.column))
        params["scope"] = source.scope.value
    cursor = conn.execute(
        sql.SQL("DELETE FROM {}.{} WHERE {}").format(
            sql.Identifier(source.schema), sql.Identifier(source.table), match
        ),
        params,
    )
    return max(cursor.rowcount, 0)


def insert_document(
    conn: Connection, source: AttachedSource, document_id: str, chunks: list[ChunkRow]
) -> None:
    """Insert one row per chunk of `document_id`, through the mapped columns."""
    names = written_columns(source)
    table = sql.SQL("{}.{}").format(sql.Identifier(source.schema), sql.Identifier(source.table))
    conn.execute(
        sql.SQL(
            "INSERT INTO {table} ({columns})"
            " SELECT {values} FROM jsonb_populate_recordset(NULL::{table}, %s) AS r"
        ).format(
            table=table,
            columns=sql.SQL(", ").join(sql.Identifier(n) for n in names),
            values=sql.SQL(", ").join(sql.SQL("r.{}").format(sql.Identifier(n)) for n in names),
        ),
        (Jsonb([row_values(source, document_id, i, chunk) for i, chunk in enumerate(chunks)]),),
    )


def row_values(source: AttachedSource, document_id: str, index: int, chunk: ChunkRow) -> dict[str, Any]:
    """The row of chunk `index` of `document_id`, by column name (values as jsonb_populate_record reads)."""
    columns = source.columns
    metadata = dict(chunk.metadata)
    if columns.document_key is not None:
        keys = _LLAMAINDEX_KEYS if source.preset == "llamaindex" else (columns.document_key,)
        metadata.update(dict.fromkeys(keys, document_id))
    row: dict[str, Any] = {}
    if columns.metadata is not None:
        row[columns.metadata] = metadata
    else:
        row.update({name: metadata[name] for name in columns.metadata_columns if name in metadata})
    row_id = f"{document_id}#{index}"
    if source.id_fill == "text":
        row[columns.id] = row_id
    elif source.id_fill == "uuid":
        row[columns.id] = str(uuid.uuid5(ID_NAMESPACE, row_id))
    row[columns.content] = chunk.content
    # The vector's text form: PostgreSQL's input function of the column's type reads it (vector or halfvec).
    row[columns.embedding] = "[" + ",".join(repr(float(v)) for v in chunk.embedding) + "]"
    if columns.document_id is not None:
        row[columns.document_id] = document_id
    if columns.title is not None:
        row[columns.title] = chunk.title or None
    if source.scope is not None:
        row[source.scope.column] = source.scope.value
    return row


def _columns(conn: Connection, oid: int) -> dict[str, _Column]:
    rows = conn.execute(
        """SELECT attname, format_type(atttypid, NULL), attnotnull,
                  atthasdef OR attidentity <> '' OR attgenerated <> '', attgenerated <> ''
           FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped""",
        (oid,),
    ).fetchall()
    return {str(r[0]): _Column(str(r[1]), bool(r[2]), bool(r[3]), bool(r[4])) for r in rows}


def _check_sequences(conn: Connection, oid: int, defaulted: list[str], where: str) -> None:
    """Refused when the defaults of the `defaulted` columns call nextval on a sequence (a serial column's)
    that this user may not advance: every insert would fail on it. Identity columns need no privilege."""
    rows = conn.execute(
        """SELECT DISTINCT s.oid::regclass::text
           FROM pg_attrdef d
           JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
           JOIN pg_depend dep ON dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid
                AND dep.refclassid = 'pg_class'::regclass
           JOIN pg_class s ON s.oid = dep.refobjid AND s.relkind = 'S'
           WHERE d.adrelid = %s AND a.attname = ANY(%s)
             -- A CASE: has_sequence_privilege fails on another relation, and filters may run in any order.
             AND CASE WHEN s.relkind = 'S' THEN NOT has_sequence_privilege(s.oid, 'USAGE')
                      AND NOT has_sequence_privilege(s.oid, 'UPDATE') ELSE false END
           ORDER BY 1""",
        (oid, defaulted),
    ).fetchall()
    if rows:
        raise _refused(
            "source.writable",
            f"the service's database user may not use the sequences that fill {where}'s defaults: "
            f"{', '.join(str(r[0]) for r in rows)} (its owner grants USAGE on them)",
        )


def _refused(field: str, message: str) -> InvalidRequestError:
    return UnusableSourceError.for_field(field, f"cannot be writable: {message}", "unusable_source")
