"""AsyncRetrievalClient against a live service: the same answers and errors as the sync client."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from retrieval_client import AsyncRetrievalClient, DocumentNotFoundError, ForbiddenError
from retrieval_client.models import EvaluationQuery, Judgment

pytestmark = pytest.mark.anyio


async def test_documents_search_answers_and_errors(
    url: str, admin_key: str, read_key: str, tmp_path: Path
) -> None:
    store = f"client-async-{uuid.uuid4().hex[:8]}"
    async with AsyncRetrievalClient(url, admin_key) as client:
        assert await client.healthy()
        await client.put_store(store)
        try:
            notes = tmp_path / "travel.md"
            notes.write_text("# Travel\n\nBook flights through the travel desk at least 14 days ahead.\n")
            assert (await client.put_file(store, "a/travel.md", notes))["status"] == "created"
            await client.put_document(store, "b#visitors", text="Visitors sign in at the front desk.")
            ids = [d["documentId"] async for d in client.iter_documents(store, page_size=1)]
            assert ids == ["a/travel.md", "b#visitors"]
            assert store in [s["name"] async for s in client.iter_stores(page_size=1)]
            page = await client.list_chunks(store, "a/travel.md", limit=1)
            assert page["chunks"][0]["id"] == "a/travel.md#0" and page["chunks"][0]["section"] == "Travel"
            assert page["nextCursor"] is None
            chunks = [c["content"] async for c in client.iter_chunks(store, "b#visitors", page_size=1)]
            assert chunks == ["Visitors sign in at the front desk."]

            found = await client.retrieve(query="booking flights", grade=0.0, store=store, similarityTopK=1)
            assert found["results"][0]["metadata"]["documentId"] == "a/travel.md"
            events = [
                e
                async for e in client.answer_stream(
                    query="How far ahead are flights booked?", grade=0.0, store=store
                )
            ]
            assert events[-1].event == "done" and events[-1].data["grounded"]

            judged: list[EvaluationQuery] = [{"id": "q1", "text": "booking flights"}]
            judgment: list[Judgment] = [{"queryId": "q1", "documentId": "a/travel.md", "relevance": 1}]
            scored = await client.evaluate(store, judged, judgment, k=1)
            assert scored["queries"][0]["scores"]["dense"]["topDocuments"] == ["a/travel.md"]
            assert [m["ndcg"] for m in scored["methods"]][0] == 1.0

            await client.delete_document(store, "b#visitors")
            with pytest.raises(DocumentNotFoundError):
                await client.get_document(store, "b#visitors")
            with pytest.raises(DocumentNotFoundError):
                await client.list_chunks(store, "b#visitors")
            async with AsyncRetrievalClient(url, read_key) as reader:
                with pytest.raises(ForbiddenError):
                    await reader.delete_store(store)
        finally:
            await client.delete_store(store)
