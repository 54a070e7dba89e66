"""Input limits. Every refusal is a 4xx JSON error naming the field, never a 500."""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

RETRIEVE = "/api/v1/rag/retrieve"
SEARCH = "/api/v1/chunks/similarity-search"
ONE_MIB = 1_048_576


def refused(response, field: str) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "validation_error"
    assert any(e["field"].startswith(field) for e in error["details"]["errors"]), error


def test_limits_query_is_at_most_8000_characters(client: TestClient) -> None:
    ok = client.post(RETRIEVE, json={"query": "é" * 8000, "grade": 0.0, "cacheTTLms": 0})
    assert ok.status_code == 200, ok.text
    refused(client.post(RETRIEVE, json={"query": "é" * 8001, "grade": 0.0}), "query")


@pytest.mark.parametrize(
    ("path", "field", "low", "high"),
    [(RETRIEVE, "similarityTopK", 1, 100), (SEARCH, "topK", 1, 100)],
)
def test_limits_top_k_stays_within_its_documented_bounds(
    client: TestClient, service, path: str, field: str, low: int, high: int
) -> None:  # type: ignore[no-untyped-def]
    base = (
        {"query": "espresso", "grade": 0.0}
        if path == RETRIEVE
        else {"queryEmbedding": service.embedder.embed(["espresso"], "query")[0]}
    )
    for value in (low, high):
        assert client.post(path, json={**base, field: value}).status_code == 200
    for value in (low - 1, high + 1, -(2**63), 2**64):
        refused(client.post(path, json={**base, field: value}), field)


def test_limits_at_most_100_doc_ids(client: TestClient) -> None:
    ids = [f"doc-{i}" for i in range(100)]
    assert client.post(RETRIEVE, json={"query": "q", "grade": 0.0, "docIds": ids}).status_code == 200
    refused(client.post(RETRIEVE, json={"query": "q", "grade": 0.0, "docIds": [*ids, "x"]}), "docIds")


def raw_json(client: TestClient, path: str, text: str):  # type: ignore[no-untyped-def]
    return client.post(path, content=text.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_limits_embedding_components_must_be_finite(client: TestClient, token: str) -> None:
    # Python's JSON parser accepts these tokens, so the API must refuse them itself.
    body = '{"queryEmbedding": [' + ", ".join(["0.1"] * 383 + [token]) + "]}"
    refused(raw_json(client, SEARCH, body), "queryEmbedding")


def test_limits_embedding_must_have_the_store_dimension(client: TestClient) -> None:
    for size in (1, 383, 385):
        response = client.post(SEARCH, json={"queryEmbedding": [0.1] * size})
        assert response.status_code == 422
        assert response.json()["error"]["details"] == {
            "store": "sample",
            "expectedDimension": 384,
            "actualDimension": size,
        }


def test_limits_a_zero_embedding_is_refused_not_scored_nan(client: TestClient) -> None:
    refused(client.post(SEARCH, json={"queryEmbedding": [0.0] * 384}), "queryEmbedding")


@pytest.mark.parametrize("scale", [1e-300, 1e30, 1e300])
def test_limits_an_embedding_of_any_length_scores_as_its_direction(
    client: TestClient, service, scale: float
) -> None:  # type: ignore[no-untyped-def]
    # pgvector works in single precision: 1e30 would overflow its sums and 1e300 cannot be stored.
    vector = service.embedder.embed(["descale the espresso machine"], "query")[0]
    plain = client.post(SEARCH, json={"queryEmbedding": vector, "topK": 3, "cacheTTLms": 0}).json()
    scaled = client.post(
        SEARCH, json={"queryEmbedding": [v * scale for v in vector], "topK": 3, "cacheTTLms": 0}
    )
    assert scaled.status_code == 200, scaled.text
    body = scaled.json()
    assert [r["id"] for r in body["results"]] == [r["id"] for r in plain["results"]]
    for got, want in zip(body["results"], plain["results"], strict=True):
        assert math.isfinite(got["score"]) and got["score"] == pytest.approx(want["score"], abs=1e-5)


@pytest.fixture()
def small_body_limit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from retrieval_core.settings import get_settings

    monkeypatch.setenv("MAX_BODY_BYTES", "4096")
    get_settings.cache_clear()
    yield
    monkeypatch.delenv("MAX_BODY_BYTES")
    get_settings.cache_clear()


def test_limits_body_over_1_mib_is_413(client: TestClient) -> None:
    from retrieval_core.settings import get_settings

    assert get_settings().max_body_bytes == ONE_MIB
    big = '{"query": "' + "a" * ONE_MIB + '", "grade": 0.5}'
    response = raw_json(client, RETRIEVE, big)
    assert response.status_code == 413
    assert response.json() == {
        "error": {
            "code": "request_too_large",
            "message": f"request body is larger than {ONE_MIB} bytes",
            "details": {"maxBytes": ONE_MIB},
        }
    }


@pytest.mark.usefixtures("small_body_limit")
def test_limits_body_limit_holds_without_a_content_length(client: TestClient) -> None:
    def chunked(total: int) -> Iterator[bytes]:
        yield b'{"query": "'
        for _ in range(total // 1000):
            yield b"a" * 1000
        yield b'", "grade": 0.5}'

    # A generator is sent with chunked transfer encoding: no Content-Length to trust.
    over = client.post(RETRIEVE, content=chunked(5000), headers={"content-type": "application/json"})
    assert over.status_code == 413 and over.json()["error"]["code"] == "request_too_large"
    under = client.post(RETRIEVE, content=chunked(2000), headers={"content-type": "application/json"})
    assert under.status_code == 200, under.text


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"], ids=["nul", "lone-surrogate"])
@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (RETRIEVE, {"query": "{bad}", "grade": 0.1}, "query"),
        (RETRIEVE, {"query": "q", "grade": 0.1, "store": "{bad}"}, "store"),
        (RETRIEVE, {"query": "q", "grade": 0.1, "docIds": ["ok", "{bad}"]}, "docIds"),
        (RETRIEVE, {"query": "q", "grade": 0.1, "metadataFilter": {"{bad}": 1}}, "metadataFilter"),
        (RETRIEVE, {"query": "q", "grade": 0.1, "metadataFilter": {"k": "{bad}"}}, "metadataFilter.k"),
        (SEARCH, {"queryEmbedding": [0.1] * 384, "metadataFilter": {"k": "{bad}"}}, "metadataFilter.k"),
        (SEARCH, {"queryEmbedding": [0.1] * 384, "docIds": ["{bad}"]}, "docIds"),
    ],
)
def test_limits_nul_and_unpaired_surrogates_in_any_text_are_422_not_500(
    client: TestClient, path: str, body: dict, field: str, bad: str
) -> None:  # type: ignore[type-arg]
    import json

    # PostgreSQL rejects U+0000 in text and jsonb; UTF-8 cannot encode a lone surrogate.
    text = json.dumps(body).replace("{bad}", json.dumps(bad)[1:-1])
    refused(raw_json(client, path, text), field)


@pytest.mark.parametrize("token", ["NaN", "Infinity"])
def test_limits_non_finite_filter_values_are_422_not_500(client: TestClient, token: str) -> None:
    body = '{"query": "q", "grade": 0.1, "metadataFilter": {"year": ' + token + "}}"
    refused(raw_json(client, RETRIEVE, body), "metadataFilter.year")


UNICODE = ["日本語のドキュメント", "مرحبا بالعالم", "emoji 🚀🧪", "e\u0301te\u0301", "Ω≈ç√∫", "\u202eRTL"]


def test_limits_unicode_works_in_every_field(client: TestClient, service) -> None:  # type: ignore[no-untyped-def]
    from retrieval_core.exceptions import InvalidRequestError
    from tests.writing import TextDocument, ensure_store, write_documents

    # Store names are ASCII identifiers (they appear in URLs and logs); the display name is free text.
    with pytest.raises(InvalidRequestError, match="store name must be"):
        ensure_store(service, "ユニコード")
    store_name = "unicode-store"
    store = ensure_store(service, store_name, display_name="Магазин ✓ 🚀")
    docs = [
        TextDocument(id=f"{word}#{i}", text=f"{word} — a note about {word}", metadata={"tag": word, word: i})
        for i, word in enumerate(UNICODE)
    ]
    write_documents(service, store, docs, 1000, 100)
    for i, word in enumerate(UNICODE):
        body = client.post(
            RETRIEVE,
            json={
                "query": word,
                "grade": 0.0,
                "store": "Магазин ✓ 🚀",
                "docIds": [f"{word}#{i}"],
                "metadataFilter": {"tag": word, word: i},
            },
        )
        assert body.status_code == 200, body.text
        results = body.json()["results"]
        assert [r["metadata"]["documentId"] for r in results] == [f"{word}#{i}"]
        # The text is stored in NFKC (docs/formats.md, Text normalisation): "e" + U+0301 is "é".
        stored = unicodedata.normalize("NFKC", word)
        assert results[0]["content"] == f"{stored} — a note about {stored}"
        assert body.json()["store"] == store_name
