"""Races end in answers: writes racing the delete of their store get 2xx, 404 or 409, never a 5xx.

Everything goes over HTTP, from several threads at once, against the real database: document PUTs and
deletes, store PUTs that change the store, and a thread that deletes the store and creates it again.
"""

from __future__ import annotations

import base64
import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.writing import HashingEmbedder, serving_with

STORES = "/api/v1/stores"
# What a write racing its store's deletion may answer: done (200, 201, 204), the store gone (404), or a
# conflict it names (409).
RACE_ANSWERS = {200, 201, 204, 404, 409}


@pytest.fixture()
def racing_client(service: Any) -> Iterator[TestClient]:
    """The app over the test database, embedding with a hash (the race is in the writes, not the model)."""
    from retrieval_core.api.app import create_app

    with serving_with(service, HashingEmbedder()), TestClient(create_app()) as client:
        yield client


def document_body(text: str) -> dict[str, Any]:
    return {"content": base64.b64encode(text.encode()).decode(), "contentType": "text/plain"}


def test_document_writes_racing_the_delete_and_re_creation_of_their_store_never_answer_5xx(
    racing_client: TestClient,
) -> None:
    store = f"race-{uuid.uuid4().hex[:8]}"
    assert racing_client.put(f"{STORES}/{store}", json={}).status_code == 201
    writers, rounds = 6, 150  # about 1,000 requests with the store threads'
    answers: Counter[tuple[str, int]] = Counter()
    bodies: dict[tuple[str, int], str] = {}
    lock = threading.Lock()
    writing = threading.Event()

    def record(kind: str, response: Any) -> None:
        with lock:
            answers[(kind, response.status_code)] += 1
            bodies.setdefault((kind, response.status_code), response.text)

    def write(worker: int) -> None:
        for n in range(rounds):
            doc = f"doc-{(worker + n) % 8}"  # writers share documents, so their locks meet too
            if n % 5 == 4:
                record("delete document", racing_client.delete(f"{STORES}/{store}/documents/{doc}"))
            else:
                text = f"version {n} of {doc} by writer {worker}"
                record(
                    "put document",
                    racing_client.put(f"{STORES}/{store}/documents/{doc}", json=document_body(text)),
                )

    def churn_store() -> None:
        n = 0
        while writing.is_set():
            record("delete store", racing_client.delete(f"{STORES}/{store}"))
            record("put store", racing_client.put(f"{STORES}/{store}", json={"displayName": f"{store} {n}"}))
            n += 1

    def redefine_store() -> None:
        n = 0
        while writing.is_set():
            body = {"displayName": f"{store} redefined {n}", "allowedMetadataKeys": [f"key{n % 3}"]}
            record("put store", racing_client.put(f"{STORES}/{store}", json=body))
            n += 1

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    store_threads = [threading.Thread(target=churn_store), threading.Thread(target=redefine_store)]
    writing.set()
    for thread in store_threads + threads:
        thread.start()
    for thread in threads:
        thread.join()
    writing.clear()
    for thread in store_threads:
        thread.join()

    assert sum(answers.values()) >= writers * rounds, answers
    unexpected = {key: count for key, count in answers.items() if key[1] not in RACE_ANSWERS}
    assert not unexpected, {key: bodies[key] for key in unexpected}
    # The race happened: writes met a deleted store, others went through, and store PUTs both created
    # the store and changed it.
    assert answers[("put document", 404)] > 0 and answers[("put document", 201)] > 0, answers
    assert answers[("put store", 201)] > 0 and answers[("put store", 200)] > 0, answers
    for (kind, status), body in bodies.items():
        if status == 404:
            assert '"store_not_found"' in body or kind == "delete document", (kind, body)
    # After the race the store answers as usual.
    racing_client.put(f"{STORES}/{store}", json={})
    final = racing_client.put(f"{STORES}/{store}/documents/after", json=document_body("after the race"))
    assert final.status_code == 201, final.text
