"""AsyncRetrievalClient: the HTTP API from asyncio (or trio) code, on httpx.AsyncClient."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
from typing_extensions import Unpack

from retrieval_client import _calls as calls
from retrieval_client._http import (
    Options,
    address,
    api_error,
    attempt_timeout_s,
    out_of_time,
    retry_delay_s,
    transport_failure,
)
from retrieval_client._sse import AnswerEvent, EventReader, answer_event, events_of_answer
from retrieval_client.error_codes import DocumentNotFoundError
from retrieval_client.errors import RetrievalApiError, RetrievalError
from retrieval_client.folder_sync import Progress, SyncReport, is_stored, local_files, sources_gone
from retrieval_client.models import (
    AnswerRequest,
    AnswerResponse,
    ChunkItem,
    ChunkListResponse,
    DocumentListResponse,
    DocumentPutRequest,
    DocumentResponse,
    DocumentStatusListResponse,
    DocumentWriteResponse,
    EvaluateResponse,
    EvaluationMethod,
    EvaluationQuery,
    HealthResponse,
    Judgment,
    KnowledgeAnswer,
    KnowledgeSearchRequest,
    ResolvedStore,
    RetrieveBatchRequest,
    RetrieveBatchResponse,
    RetrieveRequest,
    RetrieveResponse,
    SimilaritySearchRequest,
    SimilaritySearchResponse,
    StoreListResponse,
    StorePutRequest,
    StoreResponse,
)


def options_from(
    base_url: str | None, api_key: str | None, timeout_s: float, deadline_s: float, max_attempts: int
) -> Options:
    """Options, the address and key from RETRIEVAL_URL and RETRIEVAL_API_KEY when not given."""
    url = base_url or os.environ.get("RETRIEVAL_URL")
    if not url:
        raise ValueError("no address of the service: pass base_url or set RETRIEVAL_URL")
    key = api_key if api_key is not None else os.environ.get("RETRIEVAL_API_KEY")
    return Options(url.rstrip("/"), key, timeout_s, deadline_s, max(1, max_attempts))


class AsyncRetrievalClient:
    """The retrieval service's HTTP API. Request bodies are keyword arguments named as in the JSON
    (`similarityTopK=5`), answers are the JSON as typed dicts; errors raise RetrievalApiError subclasses
    named by their code. 429, 503 and a 500 with Retry-After are retried, waiting what Retry-After says,
    within `deadline_s`."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        deadline_s: float = 120.0,
        max_attempts: int = 4,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.options = options_from(base_url, api_key, timeout_s, deadline_s, max_attempts)
        self._http = http_client or httpx.AsyncClient()
        self._owns_http = http_client is None

    async def aclose(self) -> None:
        """Close the connections (when the client made its own httpx.AsyncClient)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncRetrievalClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # Sending, with the retries.

    async def _send(self, call: calls.Call, stream: bool = False) -> httpx.Response:
        deadline = time.monotonic() + self.options.deadline_s
        attempt = 0
        while True:
            attempt += 1
            timeout_s = attempt_timeout_s(self.options, deadline)
            request = self._http.build_request(
                call.method,
                address(self.options.base_url, call.path, call.params),
                json=call.body,
                headers={**self.options.headers(), **call.headers},
                timeout=timeout_s,
            )
            failure: RetrievalError
            try:
                response = await self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                failure, wait_s = transport_failure(
                    call.method, call.path, exc, timeout_s, attempt, call.repeatable
                )
            else:
                if response.status_code in call.ok:
                    return response
                if stream:
                    await response.aread()
                await response.aclose()
                failure, wait_s = api_error(response), retry_delay_s(response, attempt)
            if wait_s is None or out_of_time(wait_s, attempt, self.options, deadline):
                raise failure
            await anyio.sleep(wait_s)

    async def _json(self, call: calls.Call) -> Any:
        return (await self._send(call)).json()

    # Search and answers.

    async def retrieve(self, **body: Unpack[RetrieveRequest]) -> RetrieveResponse:
        """POST /rag/retrieve: ranked chunks for `query` (and `grade`, the score threshold)."""
        return cast(RetrieveResponse, await self._json(calls.post("/rag/retrieve", body)))

    async def retrieve_batch(self, **body: Unpack[RetrieveBatchRequest]) -> RetrieveBatchResponse:
        """POST /rag/retrieve/batch: several retrieves in one call, each with its own outcome."""
        return cast(RetrieveBatchResponse, await self._json(calls.post("/rag/retrieve/batch", body)))

    async def answer(self, **body: Unpack[AnswerRequest]) -> AnswerResponse:
        """POST /rag/answer: a grounded answer with its citations."""
        return cast(AnswerResponse, await self._json(calls.post("/rag/answer", body)))

    async def answer_stream(self, **body: Unpack[AnswerRequest]) -> AsyncIterator[AnswerEvent]:
        """POST /rag/answer as server-sent events: `delta` pieces, each `citation`, then `done`.

        A service that does not stream (behind API Gateway) answers JSON: the same events are made from
        it (one `delta` with the whole text).
        """
        response = await self._send(calls.answer_stream(body), stream=True)
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                await response.aread()
                for whole in events_of_answer(response.json()):
                    yield whole
                return
            reader = EventReader()
            async for line in response.aiter_lines():
                if (event := reader.feed(line)) is not None:
                    yield answer_event(event, response)
            if (event := reader.end()) is not None:
                yield answer_event(event, response)
        finally:
            await response.aclose()

    async def similarity_search(self, **body: Unpack[SimilaritySearchRequest]) -> SimilaritySearchResponse:
        """POST /chunks/similarity-search: the chunks nearest to a vector you computed."""
        return cast(SimilaritySearchResponse, await self._json(calls.post("/chunks/similarity-search", body)))

    async def knowledge_search(self, **body: Unpack[KnowledgeSearchRequest]) -> KnowledgeAnswer:
        """POST /knowledge/search: Gemini File Search's answer with its sources."""
        return cast(KnowledgeAnswer, await self._json(calls.post("/knowledge/search", body)))

    # Health.

    async def health(self) -> HealthResponse:
        """GET /health: each check's report, whether the service is healthy or not."""
        return cast(HealthResponse, await self._json(calls.health()))

    async def healthy(self) -> bool:
        """HEAD /health: whether every check is ok."""
        return (await self._send(calls.healthy())).status_code == 200

    # Stores.

    async def resolve_store(self, name: str, *, backend: str | None = None) -> ResolvedStore:
        """GET /stores/resolve: the store a name or display name stands for."""
        return cast(ResolvedStore, await self._json(calls.resolve_store(name, backend)))

    async def list_stores(
        self, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> StoreListResponse:
        """GET /stores: one page; pass its `nextCursor` as `cursor` for the next (or use iter_stores)."""
        return cast(StoreListResponse, await self._json(calls.list_stores(prefix, limit, cursor)))

    async def iter_stores(
        self, *, prefix: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[StoreResponse]:
        """Every store the key may read, page after page."""
        cursor = None
        while True:
            page = await self.list_stores(prefix=prefix, limit=page_size, cursor=cursor)
            for store in page["stores"]:
                yield store
            if not (cursor := page["nextCursor"]):
                return

    async def put_store(self, store: str, **body: Unpack[StorePutRequest]) -> StoreResponse:
        """PUT /stores/{store}: create the store, or change what may change of it (admin)."""
        return cast(StoreResponse, await self._json(calls.put_store(store, body)))

    async def get_store(self, store: str) -> StoreResponse:
        """GET /stores/{store}."""
        return cast(StoreResponse, await self._json(calls.get_store(store)))

    async def delete_store(self, store: str) -> None:
        """DELETE /stores/{store}: the store and everything in it (admin)."""
        await self._send(calls.delete_store(store))

    async def refresh_store(self, store: str) -> StoreResponse:
        """POST /stores/{store}/refresh: re-read an attached table's catalog."""
        return cast(StoreResponse, await self._json(calls.refresh_store(store)))

    # Documents.

    async def list_documents(
        self, store: str, *, prefix: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> DocumentListResponse:
        """GET /stores/{store}/documents: one page in id order (or use iter_documents)."""
        call = calls.list_documents(store, prefix, limit, cursor)
        return cast(DocumentListResponse, await self._json(call))

    async def list_document_statuses(
        self,
        store: str,
        status: str = "failed",
        *,
        prefix: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> DocumentStatusListResponse:
        """GET /stores/{store}/documents?status=: the sources whose last write was `status`
        (failed, skipped or ok), with the store's ingestion statistics."""
        call = calls.list_documents(store, prefix, limit, cursor, status)
        return cast(DocumentStatusListResponse, await self._json(call))

    async def iter_documents(
        self, store: str, *, prefix: str | None = None, page_size: int | None = None
    ) -> AsyncIterator[DocumentResponse]:
        """Every document of the store (under `prefix`), page after page."""
        cursor = None
        while True:
            page = await self.list_documents(store, prefix=prefix, limit=page_size, cursor=cursor)
            for document in page["documents"]:
                yield document
            if not (cursor := page["nextCursor"]):
                return

    async def evaluate(
        self,
        store: str,
        queries: list[EvaluationQuery],
        judgments: list[Judgment],
        methods: list[EvaluationMethod] | None = None,
        k: int | None = None,
    ) -> EvaluateResponse:
        """POST /stores/{store}/evaluate: each method's mean nDCG@k and recall@k over the judged queries,
        and every query's scores and first k documents. Without `methods`: dense, hybrid and keyword;
        `complete` is false when the service stopped early (its deadline), with the queries done."""
        call = calls.evaluate(store, queries, judgments, methods, k)
        return cast(EvaluateResponse, await self._json(call))

    async def list_chunks(
        self, store: str, document_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> ChunkListResponse:
        """GET /stores/{store}/chunks?documentId=: one page of the document's chunks in chunk order, each with
        its pageNumber and section (or use iter_chunks)."""
        call = calls.list_chunks(store, document_id, limit, cursor)
        return cast(ChunkListResponse, await self._json(call))

    async def iter_chunks(
        self, store: str, document_id: str, *, page_size: int | None = None
    ) -> AsyncIterator[ChunkItem]:
        """Every chunk of the document, in chunk order, page after page."""
        cursor = None
        while True:
            page = await self.list_chunks(store, document_id, limit=page_size, cursor=cursor)
            for chunk in page["chunks"]:
                yield chunk
            if not (cursor := page["nextCursor"]):
                return

    async def put_document(
        self,
        store: str,
        document_id: str,
        *,
        text_column: str | None = None,
        id_column: str | None = None,
        title_column: str | None = None,
        metadata_column: list[str] | None = None,
        **body: Unpack[DocumentPutRequest],
    ) -> DocumentWriteResponse:
        """PUT a document: `text=...`, or a file as base64 `content=...` (see put_file). The columns name
        a CSV or JSON Lines file's text, id, title and metadata columns."""
        table = calls.table_options(text_column, id_column, title_column, metadata_column)
        call = calls.put_document(store, document_id, body, table)
        return cast(DocumentWriteResponse, await self._json(call))

    async def put_file(
        self,
        store: str,
        document_id: str,
        path: str | Path,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> DocumentWriteResponse:
        """PUT a local file as a document, its content type taken from its name unless given."""
        file = Path(path)
        body = calls.file_body(await anyio.Path(file).read_bytes(), file.name, content_type, metadata)
        return cast(DocumentWriteResponse, await self._json(calls.put_document(store, document_id, body, {})))

    async def get_document(self, store: str, document_id: str) -> DocumentResponse:
        """GET a document (without its chunks)."""
        return cast(DocumentResponse, await self._json(calls.get_document(store, document_id)))

    async def delete_document(self, store: str, document_id: str) -> None:
        """DELETE a document (a CSV or JSON Lines file's id: all its records)."""
        await self._send(calls.delete_document(store, document_id))

    async def delete_document_by_query(self, store: str, document_id: str) -> None:
        """DELETE a document named by a query parameter: any id, also one a URL path cannot carry (`..`)."""
        await self._send(calls.delete_document_by_query(store, document_id))

    async def sync_folder(
        self,
        store: str,
        folder: str | Path,
        *,
        prefix: str = "",
        prune: bool = False,
        on_progress: Progress | None = None,
    ) -> SyncReport:
        """Make the store's sources under `prefix` the files of `folder`: each file's id is `prefix` + its
        path under the folder. A file the store holds with the same bytes is not sent; with `prune`,
        documents whose file is gone are deleted (a CSV's records with it). A file refused (too large,
        unreadable) is reported in `failed` and the others go on. Lists the whole store once."""
        files = local_files(folder, prefix)
        # The whole store: a CSV's records have ids of their own, outside the prefix, and `source`
        # names the file they came from.
        listed = self.iter_documents(store)
        remote = {doc["documentId"]: dict(doc) async for doc in listed}
        report = SyncReport()
        for done, (document_id, path) in enumerate(files.items(), 1):
            data = await anyio.Path(path).read_bytes()
            if is_stored(data, remote.get(document_id)):
                report.unchanged.append(document_id)
            else:
                try:
                    body = calls.file_body(data, path.name, None, None)
                    written = await self._json(calls.put_document(store, document_id, body, {}))
                    report.record(document_id, written["status"])
                except RetrievalApiError as exc:
                    report.failed[document_id] = exc
            if on_progress is not None:
                on_progress(done, len(files), document_id)
        if prune:
            for source in sources_gone(remote.values(), files, prefix):
                with contextlib.suppress(DocumentNotFoundError):  # deleted meanwhile
                    await self.delete_document(store, source)
                report.deleted.append(source)
        return report
