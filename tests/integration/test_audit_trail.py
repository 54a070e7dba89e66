"""The audit trail through each way a change comes in: HTTP, MCP, S3 events, the command line, attached
stores; the rows read back with the SQL docs/security.md gives. Data goes in as users put it in.

Keys come from API_KEYS; rows are read from `audit_log` on the test database.
"""

from __future__ import annotations

import getpass
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from fastapi.testclient import TestClient

from retrieval_core.db import audit
from tests.integration.test_grants import digest
from tests.integration.test_s3_ingest import Sync, sync  # noqa: F401  (the fixture)
from tests.writing import doc_url

STORES = "/api/v1/stores"
ADMIN = "rk_adm_" + "a0" * 16
EDITOR = "rk_edt_" + "e1" * 16
READER = "rk_rdr_" + "d2" * 16
API_KEYS = [
    {"name": "audit-admin", "sha256": digest(ADMIN), "stores": ["*"], "scopes": ["read", "write", "admin"]},
    {"name": "audit-editor", "sha256": digest(EDITOR), "stores": ["*"], "scopes": ["read", "write"]},
    {"name": "audit-reader", "sha256": digest(READER), "stores": ["*"], "scopes": ["read"]},
]
Row = tuple[str, str, str | None, str, str, str | None]


def rows(dsn: str, store: str) -> list[Row]:
    """(credential, store, document id, action, outcome, request id) of the store's rows, oldest first."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            """SELECT credential, store, document_id, action, outcome, request_id
               FROM audit_log WHERE store = %s ORDER BY id""",
            (store,),
        ).fetchall()
    return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in found]


def as_key(key: str, request_id: str | None = None) -> dict[str, str]:
    return {"x-api-key": key, **({"x-request-id": request_id} if request_id else {})}


def new_store() -> str:
    return f"audit-{uuid.uuid4().hex[:8]}"


@pytest.fixture()
def keyed(client: TestClient, configure: Any) -> TestClient:
    configure(API_KEYS=json.dumps(API_KEYS))
    return client


def test_store_create_redefine_and_delete_each_write_a_row_with_the_key_name_and_request_id(
    keyed: TestClient, postgres_dsn: str
) -> None:
    store = new_store()
    assert keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN, "req-create")).status_code == 201
    assert keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN, "req-again")).status_code == 200
    renamed = keyed.put(
        f"{STORES}/{store}", json={"displayName": "Audited"}, headers=as_key(ADMIN, "req-rename")
    )
    assert renamed.status_code == 200
    assert keyed.delete(f"{STORES}/{store}", headers=as_key(ADMIN, "req-drop")).status_code == 204
    assert rows(postgres_dsn, store) == [
        ("audit-admin", store, None, "put_store", "created", "req-create"),
        ("audit-admin", store, None, "put_store", "unchanged", "req-again"),
        ("audit-admin", store, None, "put_store", "updated", "req-rename"),
        # The store's rows outlive it.
        ("audit-admin", store, None, "delete_store", "deleted", "req-drop"),
    ]


def test_document_writes_are_rows_and_get_shows_who_last_wrote_the_document(
    keyed: TestClient, postgres_dsn: str
) -> None:
    store = new_store()
    assert keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN)).status_code == 201
    url = doc_url(store, "visitors")
    body = {"text": "Visitors sign in at the front desk."}
    assert keyed.put(url, json=body, headers=as_key(ADMIN, "req-1")).status_code == 201
    assert keyed.get(url, headers=as_key(READER)).json()["writtenBy"] == "audit-admin"
    assert keyed.put(url, json=body, headers=as_key(EDITOR, "req-2")).json()["status"] == "unchanged"
    # An unchanged write changes nothing, so the last writer stays.
    assert keyed.get(url, headers=as_key(READER)).json()["writtenBy"] == "audit-admin"
    changed = keyed.put(url, json={"text": "Visitors sign in and wear a badge."}, headers=as_key(EDITOR))
    minted = changed.headers["x-request-id"]  # none sent: the service's own id, echoed
    got = keyed.get(url, headers=as_key(READER)).json()
    assert got["writtenBy"] == "audit-editor" and got["updatedAt"] >= got["createdAt"]
    listed = keyed.get(f"{STORES}/{store}/documents", headers=as_key(READER)).json()["documents"]
    assert [d["writtenBy"] for d in listed] == ["audit-editor"]
    assert keyed.delete(url, headers=as_key(EDITOR, "req-4")).status_code == 204
    assert keyed.delete(url, headers=as_key(EDITOR, "req-5")).status_code == 404
    assert rows(postgres_dsn, store)[1:] == [
        ("audit-admin", store, "visitors", "put_document", "created", "req-1"),
        ("audit-editor", store, "visitors", "put_document", "unchanged", "req-2"),
        ("audit-editor", store, "visitors", "put_document", "updated", minted),
        ("audit-editor", store, "visitors", "delete_document", "deleted", "req-4"),
        ("audit-editor", store, "visitors", "delete_document", "not_found", "req-5"),
    ]
    with psycopg.connect(postgres_dsn) as conn:
        text = str(conn.execute("SELECT array_agg(a::text) FROM audit_log a").fetchone())
    assert all(key not in text and digest(key) not in text for key in (ADMIN, EDITOR, READER))


def test_a_row_source_writes_one_row_per_record(keyed: TestClient, postgres_dsn: str) -> None:
    from tests.files import jsonl_bytes

    store = new_store()
    keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN))
    records = [{"_id": "d1", "text": "Parking is free after six."}, {"_id": "d2", "text": "Bikes: cellar."}]
    url = doc_url(store, "corpus.jsonl")

    def put(batch: list[dict[str, str]], request_id: str) -> None:
        body = {"content": _b64(jsonl_bytes(batch)), "fileName": "corpus.jsonl"}
        assert keyed.put(url, json=body, headers=as_key(EDITOR, request_id)).status_code in (200, 201)

    put(records, "batch-1")
    put(records[:1], "batch-2")
    assert keyed.delete(url, headers=as_key(EDITOR, "batch-3")).status_code == 204
    assert [r[2:] for r in rows(postgres_dsn, store)[1:]] == [
        ("d1", "put_document", "created", "batch-1"),
        ("d2", "put_document", "created", "batch-1"),
        ("d1", "put_document", "unchanged", "batch-2"),
        ("d2", "delete_document", "deleted", "batch-2"),  # the record the file no longer holds
        ("d1", "delete_document", "deleted", "batch-3"),
    ]


def test_refusals_write_no_row_and_are_logged_without_the_key(
    keyed: TestClient, postgres_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = new_store()
    keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN))
    url = doc_url(store, "plans")
    with caplog.at_level(logging.WARNING, logger="retrieval_core.api.errors"):
        assert keyed.put(url, json={"text": "x"}).status_code == 401
        assert keyed.put(url, json={"text": "x"}, headers=as_key("rk_wrong_" + "0" * 16)).status_code == 401
        assert keyed.put(url, json={"text": "x"}, headers=as_key(READER)).status_code == 403
        assert keyed.delete(url, headers=as_key(READER)).status_code == 403
        assert keyed.delete(f"{STORES}/{store}", headers=as_key(EDITOR)).status_code == 403
    assert [r[3:5] for r in rows(postgres_dsn, store)] == [("put_store", "created")]
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert len(refusals) == 5
    assert (
        refusals[2]
        == f"refused PUT /api/v1/stores/{store}/documents/plans: 403 forbidden (credential audit-reader)"
    )
    assert refusals[4].endswith("403 forbidden (credential audit-editor)")
    assert all(ADMIN not in m and "rk_wrong" not in m for m in refusals)


@pytest.fixture()
def failing_version_bump(postgres_dsn: str, service: Any) -> Iterator[str]:
    """A store whose version cannot be bumped: every change to its documents fails at its last statement,
    after its audit rows were written in the same transaction. The trigger is the owner's doing."""
    store = new_store()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            """CREATE OR REPLACE FUNCTION test_refuse_bump() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN
                 IF NEW.name = TG_ARGV[0] AND NEW.version <> OLD.version THEN
                   RAISE EXCEPTION 'version bump refused';
                 END IF;
                 RETURN NEW;
               END $$"""
        )
        conn.execute(
            f"CREATE TRIGGER test_refuse_bump BEFORE UPDATE ON stores FOR EACH ROW"
            f" EXECUTE FUNCTION test_refuse_bump('{store}')"
        )
    yield store
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("DROP TRIGGER test_refuse_bump ON stores")
        conn.execute("DROP FUNCTION test_refuse_bump()")


def test_a_change_that_fails_leaves_no_row(
    keyed: TestClient, postgres_dsn: str, service: Any, failing_version_bump: str
) -> None:
    from retrieval_core.container import get_document_service
    from retrieval_core.documents.models import SourceInput

    store = failing_version_bump
    keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN, "req-store"))
    # A document put before the trigger bites: written through the service with the bump let through.
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE stores DISABLE TRIGGER test_refuse_bump")
    get_document_service().write_source(store, SourceInput("kept", b"Kept since before.", "text/plain"))
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE stores ENABLE TRIGGER test_refuse_bump")
    before = rows(postgres_dsn, store)

    failed = keyed.put(doc_url(store, "new"), json={"text": "Never stored."}, headers=as_key(EDITOR, "req-x"))
    assert failed.status_code >= 500, failed.text
    assert keyed.delete(doc_url(store, "kept"), headers=as_key(EDITOR, "req-y")).status_code >= 500
    assert rows(postgres_dsn, store) == before
    assert keyed.get(doc_url(store, "new"), headers=as_key(READER)).status_code == 404
    assert keyed.get(doc_url(store, "kept"), headers=as_key(READER)).status_code == 200


def as_s3_sends(records: list[dict[str, Any]], principal: str, request_id: str) -> list[dict[str, Any]]:
    """`records` with the userIdentity and responseElements S3 puts in each event record (moto 5.2 omits
    them), as the AWS documentation's event structure shows them."""
    for message in records:
        payload = json.loads(message["body"])
        for record in payload.get("Records", []):
            record["userIdentity"] = {"principalId": principal}
            record["responseElements"] = {"x-amz-request-id": request_id, "x-amz-id-2": "example"}
        message["body"] = json.dumps(payload)
    return records


def test_s3_ingest_rows_name_the_event_principal_and_the_s3_request(
    sync: Sync,  # noqa: F811
    postgres_dsn: str,
) -> None:
    uploader = "AWS:AROAEXAMPLE123456789:docs-uploader"
    sync.put("guide.txt", b"Expense reports are due within 30 days.", "text/plain")
    created = as_s3_sends(sync.receive(sequenced=True), uploader, "C3D13FE58DE4C810")
    assert sync.run(created) == {"batchItemFailures": []}
    sync.put("guide.txt.metadata.json", json.dumps({"metadataAttributes": {"team": "finance"}}).encode())
    # As moto sends it: an event naming nobody is recorded as such.
    assert sync.run(sync.receive(sequenced=True)) == {"batchItemFailures": []}
    sync.delete("guide.txt")
    removed = as_s3_sends(sync.receive(sequenced=True), "AWS:AIDAEXAMPLECLEANER", "D4E24FF69EF5D921")
    assert sync.run(removed) == {"batchItemFailures": []}

    assert [(r[0], r[5], r[2], r[3], r[4]) for r in rows(postgres_dsn, sync.store)] == [
        (f"s3:{uploader}", "C3D13FE58DE4C810", None, "put_store", "created"),
        (f"s3:{uploader}", "C3D13FE58DE4C810", "guide.txt", "put_document", "created"),
        ("s3:unknown", None, "guide.txt", "put_metadata", "updated"),
        ("s3:AWS:AIDAEXAMPLECLEANER", "D4E24FF69EF5D921", "guide.txt", "delete_document", "deleted"),
    ]


def test_an_eventbridge_event_names_its_requester_and_request_id() -> None:
    from retrieval_core.documents.s3_events import read_message
    from retrieval_core.lambdas.s3_ingest import s3_actor
    from tests.conftest import EVENTS_DIR

    event = json.loads((EVENTS_DIR / "sqs-ingest-eventbridge.json").read_text())
    [change] = read_message(event["Records"][0]["body"]).changes
    actor = s3_actor(change)
    assert (actor.credential, actor.request_id) == ("s3:123456789012", "N4N7GDK58NMKJ12R")


def test_mcp_memory_store_and_delete_write_rows_under_the_key_name(
    service: Any, postgres_dsn: str, configure: Any
) -> None:
    pytest.importorskip("mcp")
    from retrieval_core.container import get_document_service
    from retrieval_core.documents.models import StoreDefinition
    from tests.integration.test_mcp import call, memory_id, serve
    from tests.servers import free_port

    store = new_store()
    get_document_service().put_store(store, StoreDefinition())
    configure(API_KEYS=json.dumps(API_KEYS))
    port = free_port()
    stop = serve(port)
    text = "The release train leaves every second Tuesday."

    async def test() -> None:
        headers = {**as_key(EDITOR), "x-request-id": "mcp-req-7"}
        async with mcp_session(f"http://127.0.0.1:{port}/mcp", headers) as client:
            await call(client, "memory_store", {"text": text, "store": store})
            await call(client, "memory_delete", {"id": memory_id(text), "store": store})

    try:
        anyio.run(test)
    finally:
        stop()
    assert rows(postgres_dsn, store)[1:] == [
        ("audit-editor", store, memory_id(text), "put_document", "created", "mcp-req-7"),
        ("audit-editor", store, memory_id(text), "delete_document", "deleted", "mcp-req-7"),
    ]


def test_attach_refresh_and_a_writable_tables_writes_are_rows(
    keyed: TestClient, postgres_dsn: str, service: Any
) -> None:
    table = f"public.audit_kb_{uuid.uuid4().hex[:8]}"
    dim = service.embedder.dimension
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table} (id text PRIMARY KEY, doc_id text NOT NULL, body text NOT NULL,"
            f" vec vector({dim}) NOT NULL, meta jsonb NOT NULL DEFAULT '{{}}')"
        )
    store = new_store()
    source = {
        "table": table,
        "columns": {
            "id": "id",
            "content": "body",
            "embedding": "vec",
            "documentId": "doc_id",
            "metadata": "meta",
        },
        "writable": True,
    }
    try:
        attached = keyed.put(f"{STORES}/{store}", json={"source": source}, headers=as_key(ADMIN, "att-1"))
        assert attached.status_code == 201, attached.text
        assert (
            keyed.put(
                f"{STORES}/{store}", json={"source": source}, headers=as_key(ADMIN, "att-2")
            ).status_code
            == 200
        )
        assert keyed.post(f"{STORES}/{store}/refresh", headers=as_key(ADMIN, "att-3")).status_code == 200
        url = doc_url(store, "oncall")
        assert (
            keyed.put(
                url, json={"text": "The pager moves on Mondays."}, headers=as_key(EDITOR, "att-4")
            ).status_code
            == 201
        )
        assert keyed.delete(url, headers=as_key(EDITOR, "att-5")).status_code == 204
        assert keyed.delete(f"{STORES}/{store}", headers=as_key(ADMIN, "att-6")).status_code == 204
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
    assert rows(postgres_dsn, store) == [
        ("audit-admin", store, None, "attach_store", "created", "att-1"),
        ("audit-admin", store, None, "attach_store", "unchanged", "att-2"),
        ("audit-admin", store, None, "refresh_store", "refreshed", "att-3"),
        ("audit-editor", store, "oncall", "put_document", "created", "att-4"),
        ("audit-editor", store, "oncall", "delete_document", "deleted", "att-5"),
        ("audit-admin", store, None, "delete_store", "deleted", "att-6"),
    ]


def test_command_line_changes_are_rows_of_the_os_user_one_request_id_per_run(
    service: Any, postgres_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from retrieval_core.cli import actor
    from retrieval_core.cli.main import main

    store = new_store()
    (tmp_path / "a.txt").write_text("Alpha handbook page.")
    (tmp_path / "b.txt").write_text("Beta handbook page.")
    actor.cli_actor.cache_clear()  # one run of the command each, as a process would be
    assert main(["ingest", str(tmp_path), "--store", store, "--no-progress"]) == 0
    actor.cli_actor.cache_clear()
    assert main(["delete", "--store", store, "a.txt"]) == 0
    actor.cli_actor.cache_clear()
    assert main(["drop-store", "--store", store]) == 0
    capsys.readouterr()
    found = rows(postgres_dsn, store)
    assert {r[0] for r in found} == {f"cli:{getpass.getuser()}"}
    assert [r[2:5] for r in found] == [
        (None, "put_store", "created"),
        ("a.txt", "put_document", "created"),
        ("b.txt", "put_document", "created"),
        ("a.txt", "delete_document", "deleted"),
        (None, "delete_store", "deleted"),
    ]
    ingest, delete, drop = found[0][5], found[3][5], found[4][5]
    assert (
        {found[1][5], found[2][5]} == {ingest}
        and len({ingest, delete, drop}) == 3
        and all((ingest, delete, drop))
    )


def test_retention_deletes_the_rows_older_than_the_setting_in_batches(
    keyed: TestClient, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = new_store()
    keyed.put(f"{STORES}/{store}", json={}, headers=as_key(ADMIN))
    for n in range(5):
        keyed.put(doc_url(store, f"d{n}"), json={"text": f"Page {n}."}, headers=as_key(EDITOR, f"r{n}"))
    # Four rows made 91 days old, one 89: time is the one thing a test cannot wait for.
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            """UPDATE audit_log SET at = now() - CASE WHEN document_id = 'd4' THEN interval '89 days'
                   ELSE interval '91 days' END
               WHERE store = %s AND document_id IS NOT NULL""",
            (store,),
        )
    monkeypatch.setattr(audit, "PRUNE_BATCH", 2)
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # the owner's, as the maintenance runs
        deleted = audit.prune(conn, 90)
        assert deleted >= 4  # other tests' rows are not as old
        assert [r[2] for r in rows(postgres_dsn, store)] == [None, "d4"]
        assert audit.prune(conn, 90) == 0


@asynccontextmanager
async def mcp_session(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """An initialized MCP client session sending `headers` on every request."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as client,
    ):
        await client.initialize()
        yield client


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()
