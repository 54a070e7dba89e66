"""No document id can change the route a call takes: generated ids against the live service."""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator

import pytest

from retrieval_client import AsyncRetrievalClient, DocumentNotFoundError, RetrievalClient, StoreNotFoundError
from retrieval_client._http import path_safe

# What ids that climb are made of: dots, both slashes, percent escapes of them, and what browsers drop.
PIECES = [".", "..", "/", "\\", "%2e", "%2E", "%252e", "%2f", "%5c", "\t", "a", "ü", "#", "?", " ", "%"]


def generated_ids(count: int, seed: int = 20261208) -> list[str]:
    """`count` ids of one to six pieces, the same every run."""
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6))) for _ in range(count)]


@pytest.fixture()
def neighbour(client: RetrievalClient) -> Iterator[str]:
    """Another store, holding one document, that no call on the test's store may touch."""
    name = f"client-neighbour-{uuid.uuid4().hex[:8]}"
    client.put_store(name)
    client.put_document(name, "plans", text="The neighbour's plans.")
    yield name
    client.delete_store(name)


def test_dot_segment_ids_never_reach_the_store_route(
    client: RetrievalClient, store: str, neighbour: str
) -> None:
    client.put_document(store, "kept", text="A document that stays.")
    for document_id in ("..", ".", f"../../{neighbour}", "../.."):
        with pytest.raises(ValueError, match="'.' or '..' segment"):
            client.put_document(store, document_id, text="Climbing out.")
        with pytest.raises(ValueError, match="'.' or '..' segment"):
            client.get_document(store, document_id)
        # A delete goes by query parameter: nothing of that id, and the stores stay.
        with pytest.raises(DocumentNotFoundError):
            client.delete_document(store, document_id)
    assert client.get_store(store)["documentCount"] == 1
    assert client.get_store(neighbour)["documentCount"] == 1


def test_every_generated_id_is_written_read_and_deleted_as_itself_or_refused_before_it_is_sent(
    client: RetrievalClient, store: str, neighbour: str
) -> None:
    kept = 0
    for document_id in dict.fromkeys(generated_ids(150)):
        if not path_safe(document_id):
            with pytest.raises(ValueError):
                client.put_document(store, document_id, text="Refused.")
            with pytest.raises(DocumentNotFoundError):
                client.delete_document(store, document_id)
            continue
        written = client.put_document(store, document_id, text=f"The document {document_id!r}.")
        assert written["documentId"] == document_id
        assert client.get_document(store, document_id)["documentId"] == document_id
        if kept % 2:
            client.delete_document(store, document_id)
        else:
            client.delete_document_by_query(store, document_id)
        with pytest.raises(DocumentNotFoundError):
            client.get_document(store, document_id)
        kept += 1
    assert kept > 20  # the generator made ids of both kinds
    assert client.get_store(store)["documentCount"] == 0
    assert client.get_store(neighbour)["documentCount"] == 1


@pytest.mark.anyio
async def test_the_async_client_deletes_by_query_and_refuses_dot_segments(url: str, admin_key: str) -> None:
    name = f"client-async-dots-{uuid.uuid4().hex[:8]}"
    async with AsyncRetrievalClient(url, admin_key) as client:
        await client.put_store(name)
        try:
            await client.put_document(name, "a/..b", text="Dots inside a segment are fine.")
            with pytest.raises(ValueError):
                await client.get_document(name, "..")
            with pytest.raises(DocumentNotFoundError):
                await client.delete_document(name, "..")
            await client.delete_document_by_query(name, "a/..b")
            assert (await client.get_store(name))["documentCount"] == 0
        finally:
            await client.delete_store(name)
        with pytest.raises(StoreNotFoundError):
            await client.get_store(name)
