"""SQL-injection strings in every text field change nothing, leak nothing.

Every request field that reaches SQL is tried with each string of the corpus. Afterwards the stored rows
are byte-for-byte what they were (a checksum over stores, documents and chunks, plus the catalogue of
tables and roles), every answer is an ordinary 200/404/422, and no body carries SQL error text or
internal names.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"

CORPUS = [
    "' OR '1'='1",
    "' OR 1=1 --",
    '" OR ""="',
    "'; DROP TABLE chunks; --",
    "'); DELETE FROM documents; --",
    "sample'; UPDATE stores SET name = 'pwned' WHERE '1'='1",
    "1; SELECT pg_sleep(0)",
    "' UNION SELECT id, content, metadata::text, 0, 0 FROM chunks --",
    "' AND 1=CAST((SELECT current_user) AS int) --",
    "$$; DROP TABLE stores; $$",
    "E'\\x27; TRUNCATE chunks; --",
    "\\'; COPY chunks TO '/tmp/x'; --",
    "%(metadata_contains)s",
    "%s%s%s%s",
    "{}; SELECT 1",
    "*/ SELECT 1 /*",
    "'||(SELECT version())||'",
    "' OR metadata @> '{}' --",
    '{"a": 1}\'::jsonb OR true --',
    "$.year ? (@ > 0)",
    "& | ! ( ) :*",
    "sample' --",
    "ＯＲ １＝１",  # fullwidth, in case something normalises text
]

# Words that only appear in a response when SQL text, a driver error or the schema leaks.
LEAK_MARKERS = [
    "syntax error",
    "SQLSTATE",
    "psycopg",
    "pg_catalog",
    "store_id",
    "document_id",
    "content_sha256",
    "advisory",
    "Traceback",
    "ERROR:",
    "LINE 1",
    "unterminated",
    "current_user",
    "PostgreSQL 1",
]

ALLOWED = {200, 404, 422}


def snapshot(service: Any) -> tuple[Any, ...]:
    """A checksum of everything stored, and the tables and roles that exist."""
    with service.database.connection() as conn:
        stores = conn.execute(
            "SELECT count(*), md5(coalesce(string_agg(concat_ws('|', id, name, display_name, version), ','"
            " ORDER BY id), '')) FROM stores"
        ).fetchone()
        documents = conn.execute(
            "SELECT count(*), md5(coalesce(string_agg(concat_ws('|', store_id, id, content_sha256, metadata),"
            " ',' ORDER BY store_id, id), '')) FROM documents"
        ).fetchone()
        chunks = conn.execute(
            "SELECT count(*), md5(coalesce(string_agg(concat_ws('|', store_id, document_id, chunk_index,"
            " md5(content), metadata, md5(embedding::text)), ','"
            " ORDER BY store_id, document_id, chunk_index), '')) FROM chunks"
        ).fetchone()
        tables = conn.execute(
            "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class"
            " WHERE relnamespace = 'public'::regnamespace"
        ).fetchone()
        roles = conn.execute("SELECT string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles").fetchone()
    return stores, documents, chunks, tables, roles


# Each target puts the payload into one field. `vector` is filled in by the test (a 384-dim embedding).
TARGETS: dict[str, tuple[str, Any]] = {
    "retrieve.query": (RETRIEVE, lambda p, v: {"query": p, "grade": 0.0, "cacheTTLms": 0}),
    # Hybrid search hands the query text to websearch_to_tsquery as well.
    "retrieve.query.hybrid": (
        RETRIEVE,
        lambda p, v: {"query": p, "grade": 0.0, "cacheTTLms": 0, "useHybrid": True, "fusion": "weighted"},
    ),
    "retrieve.store": (RETRIEVE, lambda p, v: {"query": "q", "grade": 0.0, "store": p}),
    "retrieve.docIds": (RETRIEVE, lambda p, v: {"query": "q", "grade": 0.0, "docIds": [p, "coffee-machine"]}),
    "retrieve.metadataFilter.key": (
        RETRIEVE,
        lambda p, v: {"query": "q", "grade": 0.0, "metadataFilter": {p: 1}},
    ),
    "retrieve.metadataFilter.value": (
        RETRIEVE,
        lambda p, v: {"query": "q", "grade": 0.0, "metadataFilter": {"project_name": p}},
    ),
    "search.store": (SEARCH, lambda p, v: {"queryEmbedding": v, "store": p}),
    "search.docIds": (SEARCH, lambda p, v: {"queryEmbedding": v, "docIds": [p]}),
    "search.metadataFilter.key": (SEARCH, lambda p, v: {"queryEmbedding": v, "metadataFilter": {p: "x"}}),
    "search.metadataFilter.value": (
        SEARCH,
        lambda p, v: {"queryEmbedding": v, "metadataFilter": {"year": p}},
    ),
}

# The string form of metadataFilter (docs/api.md "Metadata filters"): `{p}` is the payload as it is, `{q}` the
# payload as a correctly escaped string literal, so it reaches the compiler as a value, not as syntax.
FILTER_EXPRESSION_TEMPLATES = [
    "project_name = '{q}'",
    "{p} = 'Platform'",
    "year > 2020 AND (title = '{q}' OR source_type IN ('s3', '{q}'))",
    "NOT project_name != '{q}'",
    "{p}",
]


def _expression(template: str, payload: str) -> str:
    return template.replace("{q}", payload.replace("\\", "\\\\").replace("'", "''")).replace("{p}", payload)


for _i, _template in enumerate(FILTER_EXPRESSION_TEMPLATES):
    TARGETS[f"retrieve.metadataFilter.expression{_i}"] = (
        RETRIEVE,
        lambda p, v, t=_template: {"query": "q", "grade": 0.0, "metadataFilter": _expression(t, p)},
    )
    TARGETS[f"search.metadataFilter.expression{_i}"] = (
        SEARCH,
        lambda p, v, t=_template: {"queryEmbedding": v, "metadataFilter": _expression(t, p)},
    )


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_sql_injection_corpus_changes_nothing_and_leaks_nothing(
    client: TestClient, service: Any, target: str
) -> None:
    path, build = TARGETS[target]
    vector = service.embedder.embed(["espresso machine"], "query")[0]
    before = snapshot(service)
    for payload in CORPUS:
        body = build(payload, vector)
        response = client.post(path, json=body)
        assert response.status_code in ALLOWED, (payload, response.status_code, response.text)
        text = response.text
        sent = json.dumps(body, ensure_ascii=False) + payload
        leaked = [m for m in LEAK_MARKERS if m.lower() in text.lower() and m.lower() not in sent.lower()]
        assert not leaked, (payload, leaked, text)
        if response.status_code == 200:
            # A payload is data: as a filter value or id it matches nothing that is not literally equal.
            results = response.json()["results"]
            if target.endswith(("docIds",)):
                assert {r["metadata"]["documentId"] for r in results} <= {"coffee-machine"}
            if target.endswith(("metadataFilter.key", "metadataFilter.value")):
                assert results == [], (payload, results)
    assert snapshot(service) == before
    # And the service still answers normally afterwards.
    after = client.post(RETRIEVE, json={"query": "espresso machine", "grade": 0.0, "similarityTopK": 1})
    assert after.status_code == 200 and after.json()["results"][0]["id"] == "coffee-machine#0"
