"""Normalised text through the write path: a typeset PDF and a Sphinx page uploaded through the documents
API are found by keyword search under their plain words, and their chunks carry no page furniture and no
permalink signs."""

from __future__ import annotations

import base64
from typing import Any

from fastapi.testclient import TestClient

from retrieval_core.db import keyword_sql
from retrieval_core.db.stores import find_store
from retrieval_core.filters.predicate import TRUE
from tests.files import book_pdf, html_bytes
from tests.writing import doc_url

STORES = "/api/v1/stores"
RETRIEVE = "/api/v1/rag/retrieve"

BOOK = [
    (
        "Introduction and preliminaries",
        [
            "R is an integrated suite of software facilities for data\nmanipulation and graphical display.",
            "The term environ-\nment is intended to characterize it as a planned\nand coherent system.",
            "Each user may keep a profile file that is read at start-up.",
            "Graphics flow to a device.",
            "Packages extend the system.",
            "Help is available online.",
        ],
    ),
    (
        "Simple manipulations",
        [
            "R operates on named data structures.",
            "Vectors can be used in arithmetic expressions.",
            "The elementary arithmetic operators are the usual ones.",
            "Missing values are marked NA.",
            "Character vectors hold strings.",
            "Index vectors select elements.",
        ],
    ),
]
SPHINX = """
<a class="skip-link" href="#content">Skip to content</a>
<div class="related" role="navigation"><a href="genindex.html">index</a> | <a href="next.html">next</a></div>
<div class="body" role="main">
<section id="s"><h1>Sorting HOW TO<a class="headerlink" href="#s">\u00b6</a></h1><p>Lists sort in place.</p>
<section id="b"><h2>Sorting Basics<a class="headerlink" href="#b">\u00b6</a></h2>
<dl><dt id="f">sorted(iterable)<a class="headerlink" href="#f">\u00b6</a></dt>
<dd>Returns a new list.</dd></dl>
</section></section></div>
<div class="sphinxsidebar" role="navigation"><h3>Navigation</h3></div>
"""


def put_file(client: TestClient, store: str, name: str, content_type: str, data: bytes) -> None:
    body = {"content": base64.b64encode(data).decode(), "contentType": content_type, "fileName": name}
    response = client.put(doc_url(store, name), json=body)
    assert response.status_code == 201, response.text


def keyword_hits(service: Any, store_name: str, query: str) -> set[str]:
    with service.database.connection() as conn, conn.transaction():
        store = find_store(conn, store_name)
        assert store is not None
        return {document_id for document_id, _, _ in keyword_sql.keyword_chunks(conn, store, query, 10, TRUE)}


def stored_chunks(client: TestClient, store: str) -> list[dict[str, Any]]:
    body = {"query": "text", "grade": 0.0, "store": store, "engineName": "naive", "similarityTopK": 100}
    response = client.post(RETRIEVE, json=body)
    assert response.status_code == 200, response.text
    results: list[dict[str, Any]] = response.json()["results"]
    return results


def test_a_typeset_pdf_and_a_sphinx_page_are_searched_by_their_plain_words(
    client: TestClient, service: Any, store: str
) -> None:
    # A store of its own that neither stems nor drops words: "environ" would stem like "environment".
    simple = f"{store}-simple"
    assert client.put(f"{STORES}/{simple}", json={"textSearch": "simple"}).status_code == 201
    try:
        put_file(client, simple, "R-intro.pdf", "application/pdf", book_pdf(BOOK, "An Introduction to R"))
        put_file(client, simple, "sorting.html", "text/html", html_bytes(SPHINX, "Sorting HOW TO"))
        # The PDF draws "fi" as a ligature glyph and breaks "environ-ment" across a line end.
        assert keyword_hits(service, simple, "profile") == {"R-intro.pdf"}
        assert keyword_hits(service, simple, "environment") == {"R-intro.pdf"}
        assert keyword_hits(service, simple, "flow") == {"R-intro.pdf"}
        chunks = stored_chunks(client, simple)
        pages = {c["metadata"]["pageNumber"] for c in chunks if c["metadata"]["documentId"] == "R-intro.pdf"}
        assert pages == set(range(1, 13))
        for chunk in chunks:
            text = chunk["content"]
            assert "Chapter 1:" not in text and "Chapter 2:" not in text and " of 12" not in text
            assert "An Introduction to R" not in text and "\ufb01" not in text
            assert "\u00b6" not in text and "Skip to content" not in text and "next" not in text
            assert "\u00b6" not in chunk["metadata"].get("section", "")
        sections = {c["metadata"]["section"] for c in chunks if c["metadata"]["documentId"] == "sorting.html"}
        assert sections == {"Sorting HOW TO", "Sorting HOW TO > Sorting Basics"}
    finally:
        client.delete(f"{STORES}/{simple}")
