"""Writable attached stores ("read-only by default ... unless the definition says so") and index
changes seen without a refresh.

Tables are made by plain SQL, as a team's pipeline or the libraries would (the preset DDL is that of
tests/integration/test_attached_presets.py, read from the libraries' code). A document written through
the API must be found by the next search, be replaced and deleted, and sit in the table's own columns as
the mapping says, so the table's own readers see it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from fastapi.testclient import TestClient

from retrieval_core.backends.attached.writes import ID_NAMESPACE
from tests.roles import grant_to_service_roles

STORES = "/api/v1/stores"
RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"

PIPELINE_TEXT = "The on-call engineer hands over the pager every Monday at ten."
GUIDE = "Kubernetes schedules pods onto nodes that have enough free CPU and memory for their requests."
GUIDE_AGAIN = "Sourdough bread rises slowly because wild yeast ferments the dough overnight."


def vector_literal(vector: Any) -> str:
    return "[" + ",".join(repr(float(v)) for v in vector) + "]"


def feature(body: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in body["features"] if f["feature"] == name)
    return found


def top(client: TestClient, store: str, query: str, **body: Any) -> list[dict[str, Any]]:
    response = client.post(
        RETRIEVE, json={"query": query, "store": store, "similarityTopK": 3, "grade": 0.0, **body}
    )
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


@pytest.fixture()
def kb_table(postgres_dsn: str, service: Any) -> Iterator[str]:
    """team.kb: a pipeline's table with one row of its own, its vectors made by the service's model."""
    dim = service.embedder.dimension
    [vector] = service.embedder.embed([PIPELINE_TEXT], "document")
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        conn.execute("DROP TABLE IF EXISTS team.kb")
        conn.execute(
            f"""CREATE TABLE team.kb (
                    id text PRIMARY KEY, doc_id text NOT NULL, body text NOT NULL, vec vector({dim}) NOT NULL,
                    meta jsonb NOT NULL DEFAULT '{{}}', title text,
                    written_at timestamptz NOT NULL DEFAULT now())"""
        )
        conn.execute(
            "INSERT INTO team.kb (id, doc_id, body, vec, meta)"
            " VALUES ('p-1', 'pipeline', %s, %s::vector, %s)",
            (PIPELINE_TEXT, vector_literal(vector), json.dumps({"team": "ops"})),
        )
    yield "team.kb"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS team.kb CASCADE")


KB_COLUMNS = {
    "id": "id",
    "content": "body",
    "embedding": "vec",
    "metadata": "meta",
    "documentId": "doc_id",
    "title": "title",
}


def attach(client: TestClient, source: dict[str, Any]) -> tuple[str, Any]:
    name = f"w-{uuid.uuid4().hex[:8]}"
    return name, client.put(f"{STORES}/{name}", json={"source": source})


def test_a_writable_table_takes_documents_that_search_sees_at_once(
    client: TestClient, kb_table: str, postgres_dsn: str, service: Any
) -> None:
    name, created = attach(client, {"table": kb_table, "columns": KB_COLUMNS, "writable": True})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["source"]["readOnly"] is False
    writes = feature(body, "writes")
    assert writes["supported"] and "id is documentId#chunkIndex" in writes["detail"]
    same = client.put(
        f"{STORES}/{name}", json={"source": {"table": kb_table, "columns": KB_COLUMNS, "writable": True}}
    )
    assert same.status_code == 200 and same.json()["source"] == body["source"]

    # A cached answer before the write: the write must retire it (the store's version moves).
    query = "How does Kubernetes decide which node runs a pod?"
    before = top(client, name, query)
    assert [r["metadata"]["documentId"] for r in before] == ["pipeline"]

    put = client.put(
        f"{STORES}/{name}/documents/guide",
        json={"text": GUIDE, "metadata": {"team": "platform"}},
    )
    assert put.status_code == 201, put.text
    assert put.json()["status"] == "created" and put.json()["chunkCount"] == 1
    found = top(client, name, query)
    assert found[0]["metadata"]["documentId"] == "guide" and found[0]["content"] == GUIDE
    assert found[0]["metadata"]["team"] == "platform"
    assert top(client, name, query, docIds=["guide"])[0]["id"] == "guide#0"

    # The table's own columns hold what the mapping says: the pipeline's reader sees the row.
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT id, body, meta, title, vec::text, written_at IS NOT NULL"
            " FROM team.kb WHERE doc_id = 'guide'"
        ).fetchall()
    assert len(rows) == 1
    row_id, stored_body, meta, title, stored_vector, defaulted = rows[0]
    assert (row_id, stored_body, defaulted) == ("guide#0", GUIDE, True)
    assert meta["team"] == "platform" and meta["contentType"] == "text/plain"
    [expected] = service.embedder.embed([f"{title}\n\n{GUIDE}" if title else GUIDE], "document")
    assert np.allclose(json.loads(stored_vector), expected, atol=1e-6)

    # Replaced: the old rows go in the same transaction as the new ones come.
    again = client.put(f"{STORES}/{name}/documents/guide", json={"text": GUIDE_AGAIN})
    assert again.status_code == 200 and again.json()["status"] == "updated"
    with psycopg.connect(postgres_dsn) as conn:
        bodies = conn.execute("SELECT body, meta FROM team.kb WHERE doc_id = 'guide'").fetchall()
    assert [b for b, _ in bodies] == [GUIDE_AGAIN] and "team" not in bodies[0][1]
    assert top(client, name, "Why does bread dough rise?")[0]["metadata"]["documentId"] == "guide"
    assert all(r["content"] != GUIDE for r in top(client, name, query))

    # Deleted: gone from the table and from the next answer; the pipeline's row stays.
    assert client.delete(f"{STORES}/{name}/documents/guide").status_code == 204
    assert client.delete(f"{STORES}/{name}/documents/guide").status_code == 404
    assert [r["metadata"]["documentId"] for r in top(client, name, query)] == ["pipeline"]
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT id FROM team.kb").fetchall() == [("p-1",)]

    # Reading documents or chunks back needs the service's own tables: refused, saying what works.
    for listed in (
        client.get(f"{STORES}/{name}/documents"),
        client.get(f"{STORES}/{name}/chunks", params={"documentId": "pipeline"}),
    ):
        assert listed.status_code == 409 and listed.json()["error"]["code"] == "conflict"
        assert "through PUT and DELETE of a document only" in listed.json()["error"]["message"]


def test_the_same_table_attached_without_writable_stays_read_only(
    client: TestClient, kb_table: str, postgres_dsn: str
) -> None:
    name, created = attach(client, {"table": kb_table, "columns": KB_COLUMNS})
    assert created.status_code == 201 and created.json()["source"]["readOnly"] is True
    for response in (
        client.put(f"{STORES}/{name}/documents/x", json={"text": "a new row"}),
        client.delete(f"{STORES}/{name}/documents/pipeline"),
    ):
        assert response.status_code == 409 and response.json()["error"]["code"] == "read_only_store"
    # Writable is part of the definition: PUT with it is another definition (409), not a silent change.
    other = client.put(
        f"{STORES}/{name}", json={"source": {"table": kb_table, "columns": KB_COLUMNS, "writable": True}}
    )
    assert other.status_code == 409 and other.json()["error"]["details"]["field"] == "source"
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute("SELECT id FROM team.kb").fetchall() == [("p-1",)]


def test_a_writable_store_refuses_the_ways_in_that_need_our_document_table(
    client: TestClient, kb_table: str, service: Any
) -> None:
    from retrieval_core.container import get_document_service
    from retrieval_core.documents.models import Sequence, SourceInput
    from retrieval_core.exceptions import ConflictError

    name, created = attach(client, {"table": kb_table, "columns": KB_COLUMNS, "writable": True})
    assert created.status_code == 201
    csv = client.put(
        f"{STORES}/{name}/documents/rows",
        json={"text": "id,text\na,first record\nb,second record\n", "contentType": "text/csv"},
    )
    assert csv.status_code == 422 and csv.json()["error"]["details"]["errors"][0]["field"] == "contentType"
    documents = get_document_service()
    source = SourceInput("file.txt", b"a file from the CLI or S3", "text/plain")
    with pytest.raises(ConflictError, match="ingesting files"):
        list(documents.write_sources(name, [source]))
    with pytest.raises(ConflictError, match="ingesting files"):
        documents.write_source(name, source, sequence=Sequence("file.txt", "01"))
    with pytest.raises(ConflictError, match="an S3 event"):
        documents.delete_source(name, "pipeline", sequence=Sequence("file.txt", "02"))
    with pytest.raises(ConflictError, match="sidecar metadata"):
        documents.put_source_metadata(name, "file.txt", {"team": "x"})
    assert [r["metadata"]["documentId"] for r in top(client, name, "who carries the pager?")] == ["pipeline"]


def test_plain_metadata_columns_a_uuid_document_column_a_defaulted_id_and_halfvec(
    client: TestClient, postgres_dsn: str, service: Any
) -> None:
    dim = service.embedder.dimension
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        conn.execute("DROP TABLE IF EXISTS team.typed")
        conn.execute(
            f"""CREATE TABLE team.typed (
                    row_id uuid PRIMARY KEY DEFAULT gen_random_uuid(), doc uuid NOT NULL, body text NOT NULL,
                    vec halfvec({dim}) NOT NULL, team text, year integer)"""
        )
    columns = {
        "id": "row_id",
        "content": "body",
        "embedding": "vec",
        "metadata": ["team", "year"],
        "documentId": "doc",
    }
    name, created = attach(client, {"table": "team.typed", "columns": columns, "writable": True})
    assert created.status_code == 201, created.text
    assert "the table's default fills row_id" in feature(created.json(), "writes")["detail"]
    refused = client.put(f"{STORES}/{name}/documents/not-a-uuid", json={"text": GUIDE})
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["details"]["errors"][0]["field"] == "documentId"
    document = str(uuid.uuid4())
    metadata = {"team": "platform", "year": 2024, "other": "not a column"}
    put = client.put(f"{STORES}/{name}/documents/{document}", json={"text": GUIDE, "metadata": metadata})
    assert put.status_code == 201, put.text
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute("SELECT row_id, doc::text, team, year FROM team.typed").fetchall()
    assert [(doc, team, year) for _, doc, team, year in rows] == [(document, "platform", 2024)]
    hit = top(client, name, "How does Kubernetes decide which node runs a pod?")[0]
    assert hit["id"] == str(rows[0][0]) and hit["metadata"] == {
        "team": "platform",
        "year": 2024,
        "documentId": document,
    }


# Presets: the rows a library reads back.


def _langchain_v1(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    conn.execute("DROP SCHEMA IF EXISTS wlc CASCADE")
    conn.execute("CREATE SCHEMA wlc")
    conn.execute(
        """CREATE TABLE wlc.langchain_pg_collection (
               uuid UUID NOT NULL, name VARCHAR NOT NULL, cmetadata JSON, PRIMARY KEY (uuid), UNIQUE (name));
           CREATE TABLE wlc.langchain_pg_embedding (
               id VARCHAR NOT NULL, collection_id UUID, embedding VECTOR, document VARCHAR, cmetadata JSONB,
               PRIMARY KEY (id),
               FOREIGN KEY(collection_id) REFERENCES wlc.langchain_pg_collection (uuid) ON DELETE CASCADE);
           CREATE INDEX ix_cmetadata_gin ON wlc.langchain_pg_embedding
               USING gin (cmetadata jsonb_path_ops);"""
    )
    conn.execute(
        "INSERT INTO wlc.langchain_pg_collection VALUES (%s, 'docs', '{}'), (%s, 'other', '{}')",
        (uuid.UUID(int=1), uuid.UUID(int=2)),
    )
    # An empty collection of an untyped vector column: the dimension is given.
    return {
        "preset": "langchain-postgres",
        "collection": "docs",
        "table": "wlc.langchain_pg_embedding",
        "dimension": 384,
    }


def _langchain_v2(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    conn.execute("DROP SCHEMA IF EXISTS wlc2 CASCADE")
    conn.execute("CREATE SCHEMA wlc2")
    conn.execute(
        """CREATE TABLE "wlc2"."docs"("langchain_id" UUID PRIMARY KEY, "content" TEXT NOT NULL,
               "embedding" vector(384) NOT NULL, "langchain_metadata" JSON)"""
    )
    return {"preset": "langchain-postgres-v2", "table": "wlc2.docs"}


def _llamaindex(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    # llama-index-vector-stores-postgres' get_data_model (upstream: no index_id column).
    conn.execute("DROP SCHEMA IF EXISTS wli CASCADE")
    conn.execute("CREATE SCHEMA wli")
    conn.execute(
        """CREATE TABLE wli.data_docs (
               id BIGSERIAL NOT NULL, text VARCHAR NOT NULL, metadata_ JSON, node_id VARCHAR,
               embedding VECTOR(384), PRIMARY KEY (id))"""
    )
    return {"preset": "llamaindex", "table": "wli.data_docs"}


# What each library's reader selects, and the row id it sees for chunk 0 of document `doc-a`.
READERS = {
    "langchain-postgres": (
        _langchain_v1,
        "SELECT id, document, cmetadata FROM wlc.langchain_pg_embedding WHERE collection_id ="
        " (SELECT uuid FROM wlc.langchain_pg_collection WHERE name = 'docs')"
        ' AND cmetadata @> \'{"documentId": "doc-a"}\'',
        "doc-a#0",
        {"documentId": "doc-a"},
    ),
    "langchain-postgres-v2": (
        _langchain_v2,
        "SELECT langchain_id::text, content, langchain_metadata FROM wlc2.docs"
        " WHERE langchain_metadata->>'documentId' = 'doc-a'",
        str(uuid.uuid5(ID_NAMESPACE, "doc-a#0")),
        {"documentId": "doc-a"},
    ),
    "llamaindex": (
        _llamaindex,
        # LlamaIndex's delete(ref_doc_id) and metadata filters read metadata_->>'ref_doc_id'.
        "SELECT node_id, text, metadata_ FROM wli.data_docs WHERE metadata_->>'ref_doc_id' = 'doc-a'",
        "doc-a#0",
        {"doc_id": "doc-a", "ref_doc_id": "doc-a", "document_id": "doc-a"},
    ),
}


@pytest.mark.parametrize("preset", list(READERS))
def test_a_writable_preset_writes_rows_its_library_reads(
    client: TestClient, postgres_dsn: str, service: Any, preset: str
) -> None:
    make, reader, row_id, keys = READERS[preset]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        source = make(conn)
        grant_to_service_roles(conn, source["table"].split(".")[0], writable=True)
    name, created = attach(client, {**source, "writable": True})
    assert created.status_code == 201, created.text
    assert created.json()["source"]["documentKey"] == next(iter(keys)) or preset == "llamaindex"
    put = client.put(f"{STORES}/{name}/documents/doc-a", json={"text": GUIDE, "metadata": {"tenant": "one"}})
    assert put.status_code == 201, put.text
    assert client.put(f"{STORES}/{name}/documents/doc-b", json={"text": GUIDE_AGAIN}).status_code == 201

    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(reader).fetchall()
    assert len(rows) == 1
    found_id, text, metadata = rows[0]
    assert (found_id, text) == (row_id, GUIDE)
    assert metadata["tenant"] == "one" and keys.items() <= metadata.items()

    query = "How does Kubernetes decide which node runs a pod?"
    hits = top(client, name, query, docIds=["doc-a"])
    assert [(h["id"], h["metadata"]["documentId"]) for h in hits] == [(row_id, "doc-a")]
    assert top(client, name, query, metadataFilter={"tenant": "one"})[0]["id"] == row_id

    assert client.delete(f"{STORES}/{name}/documents/doc-a").status_code == 204
    with psycopg.connect(postgres_dsn) as conn:
        assert conn.execute(reader).fetchall() == []
    assert [h["metadata"]["documentId"] for h in top(client, name, "Why does bread rise?")] == ["doc-b"]


def test_langchain_writes_stay_in_the_store_s_collection(client: TestClient, postgres_dsn: str) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        source = _langchain_v1(conn)
        conn.execute(
            "INSERT INTO wlc.langchain_pg_embedding VALUES ('doc-a#0', %s, %s::vector, 'theirs', %s)",
            (uuid.UUID(int=2), vector_literal([1.0] * 384), json.dumps({"documentId": "doc-a"})),
        )
        grant_to_service_roles(conn, "wlc", writable=True)
    name, created = attach(client, {**source, "writable": True})
    assert created.status_code == 201, created.text
    # The other collection's row holds the id this write would take: refused, nothing written.
    clash = client.put(f"{STORES}/{name}/documents/doc-a", json={"text": GUIDE})
    assert clash.status_code == 409 and clash.json()["error"]["code"] == "conflict"
    # Deleting doc-a of this collection leaves the other collection's doc-a alone.
    assert client.delete(f"{STORES}/{name}/documents/doc-a").status_code == 404
    assert client.put(f"{STORES}/{name}/documents/doc-c", json={"text": GUIDE}).status_code == 201
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute("SELECT id, collection_id FROM wlc.langchain_pg_embedding ORDER BY id").fetchall()
    assert rows == [("doc-a#0", uuid.UUID(int=2)), ("doc-c#0", uuid.UUID(int=1))]


# Definitions the service could not write: refused, with the field, and nothing created or altered.


@pytest.fixture()
def odd_tables(postgres_dsn: str, service: Any) -> Iterator[None]:
    dim = service.embedder.dimension
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS odd CASCADE")
        conn.execute("CREATE SCHEMA odd")
        conn.execute(
            f"""CREATE TABLE odd.t (id text PRIMARY KEY, n integer NOT NULL, doc text, body text,
                                   vec vector({dim}), meta jsonb, tsv tsvector, small vector(8));
                CREATE VIEW odd.v AS SELECT id, doc, body, vec, meta FROM odd.t;
                CREATE TABLE odd.ints (
                    id integer PRIMARY KEY, doc text, body text, vec vector({dim}), meta jsonb);
                CREATE TABLE odd.data_docs (
                    id BIGSERIAL NOT NULL, index_id VARCHAR NOT NULL, text VARCHAR NOT NULL, metadata_ JSON,
                    node_id VARCHAR, embedding VECTOR({dim}), PRIMARY KEY (id));
                CREATE TABLE odd.serial (id bigserial PRIMARY KEY, doc text, body text, vec vector({dim}),
                                         meta jsonb);"""
        )
        # Granted all a writable store needs: each definition is refused for its own reason.
        roles = grant_to_service_roles(conn, "odd", writable=True)
        # But the sequence filling odd.serial's ids: an insert would fail on it.
        conn.execute(f'REVOKE USAGE ON SEQUENCE odd.serial_id_seq FROM "{roles.write}"')
    yield
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS odd CASCADE")


BASE = {"id": "id", "content": "body", "embedding": "vec", "metadata": "meta", "documentId": "doc"}


@pytest.mark.parametrize(
    ("source", "field", "says"),
    [
        ({"table": "odd.v", "columns": BASE}, "source.writable", "not a table"),
        (
            {"table": "odd.t", "columns": {**BASE, "documentId": None}},
            "source.columns.documentId",
            "map the column",
        ),
        (
            {"table": "odd.t", "columns": {**BASE, "documentId": "id"}},
            "source.columns.documentId",
            "is the row id",
        ),
        (
            {"table": "odd.t", "columns": {**BASE, "metadata": None}},
            "source.columns.metadata",
            "carry metadata",
        ),
        (
            {"table": "odd.t", "columns": BASE},
            "source.writable",
            "without a default that the mapping does not fill: n",
        ),
        (
            {"table": "odd.t", "columns": {**BASE, "metadata": ["n"], "fulltext": "tsv"}},
            "source.columns.fulltext",
            "not a generated column",
        ),
        (
            {"table": "odd.t", "columns": {**BASE, "metadata": ["n"], "embedding": "small"}, "dimension": 8},
            "source.writable",
            "made by unknown",
        ),
        ({"table": "odd.ints", "columns": BASE}, "source.columns.id", "integer without a default"),
        ({"preset": "llamaindex", "table": "odd.data_docs"}, "source.writable", "index_id"),
        ({"table": "odd.serial", "columns": BASE}, "source.writable", "sequences that fill odd.serial's"),
    ],
)
def test_definitions_the_service_cannot_write_are_refused_and_change_nothing(
    client: TestClient, odd_tables: None, postgres_dsn: str, source: dict[str, Any], field: str, says: str
) -> None:
    columns = {k: v for k, v in source.get("columns", {}).items() if v is not None}
    definition = {**source, "writable": True, **({"columns": columns} if columns else {})}
    name, response = attach(client, definition)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unusable_source" and error["details"]["errors"][0]["field"] == field
    assert "cannot be writable" in error["message"] and says in error["message"], error["message"]
    assert client.get(f"{STORES}/{name}").status_code == 404
    with psycopg.connect(postgres_dsn) as conn:
        shape = conn.execute(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'odd' AND table_name = 't'"
        ).fetchone()
    assert shape == (8,)


def test_the_cli_attaches_writable(service: Any, kb_table: str, capsys: pytest.CaptureFixture[str]) -> None:
    from retrieval_core.cli.main import main

    name = f"w-{uuid.uuid4().hex[:8]}"
    columns = [
        "--id",
        "id",
        "--content",
        "body",
        "--embedding",
        "vec",
        "--metadata",
        "meta",
        "--document-id",
        "doc_id",
    ]
    assert main(["stores", "attach", name, "--table", kb_table, *columns, "--writable"]) == 0
    assert "yes  writes: writable" in capsys.readouterr().out
    assert (
        main(
            [
                "stores",
                "attach",
                f"{name}-v",
                "--table",
                kb_table,
                "--id",
                "id",
                "--content",
                "body",
                "--embedding",
                "vec",
                "--writable",
            ]
        )
        == 2
    )
    assert "cannot be writable" in capsys.readouterr().err


# Index changes are seen within ATTACHED_INSPECTION_TTL_S, without a refresh.

DIM = 32
ROWS = 2_000


@pytest.fixture()
def ttl_client(own_runtime: Any) -> Iterator[TestClient]:
    from retrieval_core.api.app import create_app

    own_runtime(EXACT_SEARCH_MAX_ROWS="500", ATTACHED_INSPECTION_TTL_S="1")
    with TestClient(create_app()) as test_client:
        yield test_client


@pytest.fixture()
def indexed_table(postgres_dsn: str, service: Any) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(ROWS, DIM)).astype(np.float32)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS team")
        conn.execute("DROP TABLE IF EXISTS team.live")
        conn.execute(
            f"CREATE TABLE team.live (id text PRIMARY KEY, body text, vec vector({DIM}), tenant text)"
        )
        with conn.cursor().copy("COPY team.live FROM STDIN") as copy:
            for i in range(ROWS):
                copy.write_row(
                    (f"r{i}", f"row {i}", vector_literal(vectors[i]), "few" if i < 100 else "many")
                )
        conn.execute("CREATE INDEX live_vec_idx ON team.live USING hnsw (vec vector_cosine_ops)")
        conn.execute("ANALYZE team.live")
    yield vectors
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS team.live")


def test_a_dropped_or_created_index_is_seen_within_the_ttl_without_a_refresh(
    ttl_client: TestClient, indexed_table: np.ndarray, postgres_dsn: str
) -> None:
    columns = {"id": "id", "content": "body", "embedding": "vec", "metadata": ["tenant"]}
    name, created = attach(ttl_client, {"table": "team.live", "columns": columns})
    assert created.status_code == 201 and created.json()["source"]["vectorIndex"] == "live_vec_idx"
    query = {"queryEmbedding": indexed_table[0].tolist(), "topK": 5, "store": name, "cacheTTLms": 0}

    def search(**extra: Any) -> Any:
        return ttl_client.post(SEARCH, json={**query, **extra})

    assert search().status_code == 200
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX team.live_vec_idx")
    time.sleep(1.1)
    # No refresh: the search inspected the table again and knows it must scan 2,000 rows, over the cap.
    refused = search()
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "exact_scan_refused"
    narrow = search(metadataFilter={"tenant": "few"})
    assert narrow.status_code == 200 and narrow.json()["results"][0]["id"] == "r0"
    assert ttl_client.get(f"{STORES}/{name}").json()["source"]["vectorIndex"] is None

    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE INDEX live_vec_idx2 ON team.live USING hnsw (vec vector_cosine_ops)")
    time.sleep(1.1)
    assert search().status_code == 200
    # GET inspects at once (and hands its inspection to the searches).
    shown = ttl_client.get(f"{STORES}/{name}").json()["source"]
    assert shown["vectorIndex"] == "live_vec_idx2"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP INDEX team.live_vec_idx2")
    assert ttl_client.get(f"{STORES}/{name}").json()["source"]["vectorIndex"] is None
    assert search().status_code == 409
