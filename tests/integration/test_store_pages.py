"""GET /api/v1/stores a page at a time: name order, name prefixes, cursors and limits, grants, the plans
PostgreSQL runs for them, and `retrieval stores` walking the pages. Stores are created through
PUT /api/v1/stores/{store}, as a user creates them, and deleted after."""

from __future__ import annotations

import base64
import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import Rollback, sql

from retrieval_core.api.app import create_app
from retrieval_core.cli.main import main
from retrieval_core.container import get_document_service
from retrieval_core.db.stores import NAME_TAKEN, STORE_BY_NAME, STORE_COLUMNS, store_page_query
from retrieval_core.documents import cursors
from retrieval_core.documents.service import DocumentService
from retrieval_core.grants import Grant

STORES = "/api/v1/stores"
# Every store of `many` starts with this; the characters after it sort differently in byte order than
# in a linguistic collation (capitals before lower case, '-' before '.' before digits before '_').
RUN = f"pages-{uuid.uuid4().hex[:6]}-"
MANY = 250


@pytest.fixture(scope="module")
def many(sample_store: Any) -> Iterator[list[str]]:
    """MANY stores starting with RUN, the first holding one document; their names in byte order."""
    firsts = itertools.islice(itertools.cycle("aZ_-.9"), MANY)
    names = [f"{RUN}{c}{i:03d}" for i, c in enumerate(firsts)]
    with TestClient(create_app()) as client:
        for name in names:
            assert client.put(f"{STORES}/{name}", json={"displayName": f"Shown {name}"}).status_code == 201
        first = min(names)
        assert client.put(f"{STORES}/{first}/documents/a", json={"text": "Parking."}).status_code == 201
        yield sorted(names)
        for name in names:
            assert client.delete(f"{STORES}/{name}").status_code == 204


@pytest.fixture()
def stores_named(client: TestClient) -> Iterator[Any]:
    """`stores_named(name, ..., displayName=...)` creates stores for one test; they are deleted after."""
    created: list[str] = []

    def create(*names: str, **body: str) -> None:
        for name in names:
            assert client.put(f"{STORES}/{name}", json=body).status_code == 201, name
            created.append(name)

    yield create
    for name in created:
        client.delete(f"{STORES}/{name}")


def walk(client: TestClient, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of GET /api/v1/stores with `params`, following nextCursor to the null one."""
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        answer = client.get(STORES, params={**params, **({"cursor": cursor} if cursor else {})})
        assert answer.status_code == 200, answer.text
        pages.append(answer.json()["stores"])
        cursor = answer.json()["nextCursor"]
        if cursor is None:
            return pages


def flat(pages: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return list(itertools.chain.from_iterable(pages))


def names_of(stores: list[dict[str, Any]]) -> list[str]:
    return [s["name"] for s in stores]


def test_pages_of_100_give_each_store_once_in_name_order(client: TestClient, many: list[str]) -> None:
    pages = walk(client, prefix=RUN, limit=100)
    assert [len(page) for page in pages] == [100, 100, 50]
    assert names_of(flat(pages)) == many
    first = pages[0][0]
    assert (first["name"], first["documentCount"], first["chunkCount"]) == (many[0], 1, 1)
    assert first["displayName"] == f"Shown {many[0]}" and first["embeddingModel"]
    assert {(s["documentCount"], s["chunkCount"]) for s in flat(pages)[1:]} == {(0, 0)}


def test_the_whole_list_is_in_byte_order_with_each_store_once(client: TestClient, many: list[str]) -> None:
    listed = names_of(flat(walk(client, limit=100)))
    assert [n.encode() for n in listed] == sorted({n.encode() for n in listed})  # ordered, no repeats
    assert [n for n in listed if n.startswith(RUN)] == many and "sample" in listed


def test_the_default_page_is_100_and_a_limit_of_1000_is_allowed(client: TestClient, many: list[str]) -> None:
    assert len(client.get(STORES, params={"prefix": RUN}).json()["stores"]) == 100
    whole = client.get(STORES, params={"prefix": RUN, "limit": 1000}).json()
    assert names_of(whole["stores"]) == many and whole["nextCursor"] is None


def test_a_prefix_matches_names_byte_for_byte_with_no_wildcards(
    client: TestClient, stores_named: Any
) -> None:
    run = f"prefix-{uuid.uuid4().hex[:6]}-"
    stores_named(f"{run}team", f"{run}team_a", f"{run}teamXa", f"{run}team-b", f"{run}teamab")
    stores_named(f"{run}other", displayName=f"{run}team, shown")

    def listed(prefix: str) -> list[str]:
        return names_of(flat(walk(client, prefix=prefix)))

    team = [f"{run}team", f"{run}team-b", f"{run}teamXa", f"{run}team_a", f"{run}teamab"]
    assert listed(f"{run}team") == team  # byte order; the display name of `other` is not matched
    assert listed(f"{run}team_") == [f"{run}team_a"]  # `_` is no single-character wildcard
    assert listed(f"{run}team%") == []  # nor `%` any string
    assert listed(f"{run}team\\") == [] and listed(f"{run}TEAM") == []
    assert listed(f"{run}team_a") == [f"{run}team_a"]
    assert listed(f"{run}team_az") == []
    assert listed(run) == [f"{run}other", *team]


@pytest.mark.parametrize(
    ("params", "field", "code"),
    [
        ({"limit": 0}, "limit", "validation_error"),
        ({"limit": 1001}, "limit", "validation_error"),
        ({"limit": "ten"}, "limit", "validation_error"),
        ({"prefix": "p" * 129}, "prefix", "validation_error"),
        ({"prefix": "a\x00"}, "prefix", "validation_error"),
        ({"cursor": "c" * 2049}, "cursor", "validation_error"),
        ({"cursor": "%%%"}, "cursor", "invalid_cursor"),
    ],
)
def test_a_bad_limit_prefix_or_cursor_is_a_422_naming_it(
    client: TestClient, params: dict[str, Any], field: str, code: str
) -> None:
    answer = client.get(STORES, params=params)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and error["details"]["errors"][0]["field"] == field
    assert error["message"].startswith(f"{field}:")


@pytest.mark.parametrize(
    ("key", "cause"),
    [
        (b"\xff\xfe", "not_text"),  # base64, but of no text
        (b"sample\x00", "not_a_key"),
        (b"policies/travel.pdf", "not_a_store_name"),  # a documents list's cursor
    ],
)
def test_a_tampered_cursor_is_refused_naming_the_cause(client: TestClient, key: bytes, cause: str) -> None:
    tampered = base64.urlsafe_b64encode(key).decode().rstrip("=")
    answer = client.get(STORES, params={"cursor": tampered})
    assert answer.status_code == 422
    error = answer.json()["error"]
    (item,) = error["details"]["errors"]
    assert error["code"] == "invalid_cursor" and (item["field"], item["type"]) == ("cursor", cause)
    documents = client.get(f"{STORES}/sample/documents", params={"cursor": tampered})
    if cause != "not_a_store_name":  # any text is a document id
        assert documents.json()["error"]["details"]["errors"][0]["type"] == cause


def test_a_cursor_continues_after_its_store_even_once_that_store_is_gone(
    client: TestClient, stores_named: Any
) -> None:
    run = f"gone-{uuid.uuid4().hex[:6]}-"
    stores_named(f"{run}a", f"{run}b", f"{run}c")
    first = client.get(STORES, params={"prefix": run, "limit": 1}).json()
    assert names_of(first["stores"]) == [f"{run}a"]
    assert client.delete(f"{STORES}/{run}a").status_code == 204
    rest = client.get(STORES, params={"prefix": run, "cursor": first["nextCursor"]}).json()
    assert rest == {"stores": rest["stores"], "nextCursor": None}
    assert names_of(rest["stores"]) == [f"{run}b", f"{run}c"]


def test_a_grant_pages_through_its_own_stores_only(service: Any, many: list[str]) -> None:
    docs = get_document_service()
    granted = Grant("three", frozenset({"read"}), frozenset({many[7], many[3], many[200], "elsewhere"}))
    pages = []
    cursor = None
    while True:
        page, cursor = docs.list_stores(prefix=RUN, limit=1, cursor=cursor, grant=granted)
        pages.append([s.name for s in page])
        if cursor is None:
            break
    assert pages == [[many[3]], [many[7]], [many[200]]]  # full pages: the grant filters in the query
    assert [s.name for s in docs.every_store(RUN[:-1], grant=granted, page=2)] == [
        many[3],
        many[7],
        many[200],
    ]


def test_the_list_the_prefix_and_display_name_lookups_read_indexes(service: Any, postgres_dsn: str) -> None:
    """On a few thousand stores, with the planner's own choice (no setting forces an index). As the owner:
    the stores' statistics are taken (ANALYZE) in the transaction that writes them."""
    with psycopg.connect(postgres_dsn, autocommit=True) as conn, conn.transaction() as transaction:
        conn.execute(
            """INSERT INTO stores (name, display_name, embedding_model, dimension)
               SELECT 'plan-' || md5(g::text), 'Plan store ' || g, 'm', 4 FROM generate_series(1, 4000) g"""
        )
        conn.execute("ANALYZE stores")

        def plan(query: sql.Composable, params: dict[str, Any]) -> str:
            return "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + query, params))

        # With a prefix, the planner may also read the range as a bitmap and sort it (a prefix matching few
        # stores): either way the range comes from the index, never from reading the table.
        for args in (("plan-a", None, 101), ("plan-a", "plan-a1", 101), ("plan-", "plan-5", 101)):
            shown = plan(*store_page_query(*args))
            assert "stores_name_bytes" in shown and "Seq Scan on stores" not in shown, (args, shown)
        # Every store, from the start or after a cursor: the index in order, `limit` rows, no sort.
        for after in (None, "plan-5"):
            shown = plan(*store_page_query("", after, 101))
            assert "Index Scan using stores_name_bytes" in shown and "Sort" not in shown, shown
        for query, params in (
            (NAME_TAKEN, {"n": "Plan store 7", "except": "x"}),
            (f"SELECT {STORE_COLUMNS} {STORE_BY_NAME}", {"n": "Plan store 7"}),
        ):
            shown = plan(sql.SQL(query), params)  # type: ignore[arg-type]
            assert "stores_display_name" in shown and "Seq Scan on stores" not in shown, shown
        raise Rollback(transaction)


def test_the_cli_walks_the_pages_and_prints_every_store_in_name_order(
    many: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The CLI reads pages of MAX_PAGE stores; 100 here, so that MANY stores take three pages.
    monkeypatch.setattr(cursors, "MAX_PAGE", 100)
    pages: list[int] = []
    real = DocumentService.list_stores

    def counted(self: DocumentService, *args: Any, **kwargs: Any) -> Any:
        page, cursor = real(self, *args, **kwargs)
        pages.append(len(page))
        return page, cursor

    monkeypatch.setattr(DocumentService, "list_stores", counted)
    assert main(["stores", "list", "--prefix", RUN]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == many and pages == [100, 100, 50]
    assert lines[0].split("\t")[1:] == [f"Shown {many[0]}", "all-MiniLM-L6-v2", "384", "1 chunks"]

    pages.clear()
    assert main(["stores", "--prefix", RUN, "--limit", "5"]) == 0
    assert [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()] == many[:5]
    assert pages == [5]  # no page beyond the stores asked for
