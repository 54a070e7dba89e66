"""The write side over HTTP: store definitions and documents (docs/documents-api.md).

Registered after the stores router, so GET /api/v1/stores/resolve keeps winning over
GET /api/v1/stores/{store}. A document id is the rest of the path, percent-decoded: `a%2Fb%23c` is
the document `a/b#c`. Every route passes the caller's grant to the service, which checks it once.
Store names and document ids are `Text`: a NUL, which PostgreSQL text cannot hold, is a 422, not a 500.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import threading
from dataclasses import asdict
from typing import Annotated, Any
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool

from retrieval_core.api.dependencies import ActorDep, GrantDep
from retrieval_core.api.docs import error_responses
from retrieval_core.backends.attached.definition import SourceRequest, source_request
from retrieval_core.container import get_document_service
from retrieval_core.documents.chunking import Chunking
from retrieval_core.documents.cursors import DEFAULT_PAGE, MAX_CURSOR, MAX_PAGE, MAX_STORE_PREFIX
from retrieval_core.documents.models import (
    ChunkInfo,
    DocumentInfo,
    SourceInput,
    SourceWrite,
    StoreDefinition,
    StoreInfo,
)
from retrieval_core.documents.service import DocumentService
from retrieval_core.exceptions import DocumentNotFoundError, InvalidRequestError
from retrieval_core.parsers.detect import CSV, JSONL
from retrieval_core.parsers.tables import TableOptions
from retrieval_core.schemas.common import Text
from retrieval_core.schemas.documents import (
    ChunkingSettings,
    ChunkItem,
    ChunkListResponse,
    DocumentListResponse,
    DocumentPutRequest,
    DocumentResponse,
    DocumentStatusItem,
    DocumentStatusListResponse,
    DocumentWriteItem,
    DocumentWriteResponse,
    EmbedderSettings,
    IngestionOutcome,
    IngestionStatistics,
    PipelineOptions,
    PipelineSettings,
    SourceBlock,
    StoreListResponse,
    StorePutRequest,
    StoreResponse,
)
from retrieval_core.settings import get_settings


def utf8_path(request: Request) -> None:
    """A 422 unless the path's percent-escapes decode to UTF-8: servers decode `%FF` to U+FFFD, so ids that
    differ only in invalid bytes would otherwise all name the same document.

    Under Mangum (Lambda) there is no raw path: API Gateway hands the path over already decoded
    (docs/documents-api.md, "Ids"), and decoding it again would misread an id holding `%`."""
    raw = request.scope.get("raw_path")
    if raw is None:
        return
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as error:
        raise InvalidRequestError.for_field(
            "path",
            f"must be UTF-8 once percent-decoded (byte {error.start} of the decoded path is not): "
            "percent-encode each id as UTF-8",
            "value_error",
        ) from None


router = APIRouter(prefix="/api/v1/stores", tags=["documents"], dependencies=[Depends(utf8_path)])

ROW_FORMATS = (CSV, JSONL)
# How often a document PUT looks whether its client is still there while the source is read.
DISCONNECT_POLL_S = 0.2
DocumentsDep = Annotated[DocumentService, Depends(get_document_service)]


def table_options(
    text_column: Annotated[list[str] | None, Query(alias="textColumn")] = None,
    id_column: Annotated[str | None, Query(alias="idColumn")] = None,
    title_column: Annotated[str | None, Query(alias="titleColumn")] = None,
    metadata_column: Annotated[list[str] | None, Query(alias="metadataColumn")] = None,
) -> TableOptions:
    """A CSV or JSON Lines PUT's columns (docs/documents-api.md, "Tables"); each list parameter repeats."""
    metadata = tuple(metadata_column) if metadata_column else None
    return TableOptions(tuple(text_column or ()), id_column, title_column, metadata)


TableDep = Annotated[TableOptions, Depends(table_options)]


def _errors(*statuses: int) -> dict[str, Any]:
    return error_responses(*statuses, 403, 404, 500)


@router.get("", response_model=StoreListResponse, openapi_extra=_errors(422))
async def list_stores(
    documents: DocumentsDep,
    grant: GrantDep,
    prefix: Annotated[Text, Query(max_length=MAX_STORE_PREFIX)] = "",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None,
) -> StoreListResponse:
    """The stores the caller's grant covers whose name (not display name) starts with `prefix`, in name
    order (byte order), `limit` per page, with their counts (scope read).

    Pass `nextCursor` back as `cursor` for the next page; it is null on the last one.
    """
    page, next_cursor = await run_in_threadpool(documents.list_stores, prefix, limit, cursor, grant)
    return StoreListResponse(stores=[_store_response(s) for s in page], next_cursor=next_cursor)


@router.put(
    "/{store}",
    response_model=StoreResponse,
    responses={201: {"model": StoreResponse, "description": "Created"}},
    openapi_extra=_errors(409, 422),
)
async def put_store(
    store: Text,
    body: StorePutRequest,
    documents: DocumentsDep,
    grant: GrantDep,
    actor: ActorDep,
    response: Response,
) -> StoreResponse:
    """Create the store (201) or apply the definition (200; the same one again changes nothing).

    Scope admin. `storage` and `textSearch` cannot change (409); an unknown `textSearch` is a 422;
    a `source` block attaches the store to an existing table (validated against the catalog: 422 naming
    the field when it does not check out, and nothing is created);
    `displayName` may change, but not to another store's name or display name (409).
    `resolve` and names outside the store-name rule are refused (422).
    """
    if body.source is not None and body.pipeline is not None:
        raise InvalidRequestError.for_field(
            "pipeline", "an attached store's rows are its own: it has no pipeline", "invalid_source"
        )
    definition = StoreDefinition(
        display_name=body.display_name,
        storage=body.storage,
        allowed_metadata_keys=tuple(body.allowed_metadata_keys)
        if body.allowed_metadata_keys is not None
        else None,
        text_search=body.text_search,
        source=_source_request(body.source) if body.source is not None else None,
        chunking=_chunking(body.pipeline),
    )
    if body.source is not None and body.text_search is not None:
        raise InvalidRequestError.for_field(
            "textSearch",
            "an attached store's text search configuration is source.textSearch",
            "invalid_source",
        )
    info, created = await run_in_threadpool(documents.put_store, store, definition, grant, actor)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return _store_response(info)


@router.get("/{store}", response_model=StoreResponse, openapi_extra=_errors())
async def get_store(store: Text, documents: DocumentsDep, grant: GrantDep) -> StoreResponse:
    """One store with its document and chunk counts (scope read)."""
    return _store_response(await run_in_threadpool(documents.get_store, store, grant))


@router.post("/{store}/refresh", response_model=StoreResponse, openapi_extra=_errors(409))
async def refresh_store(
    store: Text, documents: DocumentsDep, grant: GrantDep, actor: ActorDep
) -> StoreResponse:
    """An attached store: inspect its table again (indexes, rows) and stop serving answers cached before
    (scope admin). The service does not see writes to a table it does not own: call this after one."""
    return _store_response(await run_in_threadpool(documents.refresh_store, store, grant, actor))


@router.delete("/{store}", status_code=204, openapi_extra=_errors())
async def delete_store(store: Text, documents: DocumentsDep, grant: GrantDep, actor: ActorDep) -> Response:
    """Drop the store with all its documents (scope admin); cached answers about it are forgotten."""
    await run_in_threadpool(documents.delete_store, store, grant, actor)
    return Response(status_code=204)


@router.get(
    "/{store}/documents",
    response_model=DocumentListResponse | DocumentStatusListResponse,
    openapi_extra=_errors(422),
)
async def list_documents(
    store: Text,
    documents: DocumentsDep,
    grant: GrantDep,
    prefix: Annotated[Text, Query(max_length=1024)] = "",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None,
    status: Annotated[
        IngestionOutcome | None,
        Query(description="List sources by their last write's outcome instead, with the store's counts."),
    ] = None,
) -> DocumentListResponse | DocumentStatusListResponse:
    """Documents whose id starts with `prefix`, in id order (byte order), `limit` per page (scope read).

    With `status` (ok, failed or skipped): the sources whose last write came to it, failed ones included
    (they have no document), each with its code, message and time, and the store's ingestion counts.
    Pass `nextCursor` back as `cursor` for the next page; it is null on the last one.
    """
    if status is not None:
        rows, after, counts = await run_in_threadpool(
            documents.document_statuses, store, status, prefix, limit, cursor, grant
        )
        return DocumentStatusListResponse(
            documents=[
                DocumentStatusItem(
                    document_id=r.document_id,
                    status=r.outcome,
                    change=r.change,
                    code=r.code,
                    message=r.message,
                    written_by=r.written_by,
                    at=r.at,
                )
                for r in rows
            ],
            statistics=IngestionStatistics(**asdict(counts)),
            next_cursor=after,
        )
    page, next_cursor = await run_in_threadpool(documents.list_documents, store, prefix, limit, cursor, grant)
    return DocumentListResponse(documents=[_document_response(d) for d in page], next_cursor=next_cursor)


@router.get("/{store}/chunks", response_model=ChunkListResponse, openapi_extra=_errors(409, 422))
async def list_chunks(
    store: Text,
    documents: DocumentsDep,
    grant: GrantDep,
    document_id: Annotated[Text, Query(alias="documentId", min_length=1, max_length=1024)],
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=MAX_CURSOR)] = None,
) -> ChunkListResponse:
    """The chunks of the document `documentId`, in chunk order, `limit` per page (scope read): each with its
    text, metadata, and the page number and section the parser gave it.

    404 `document_not_found` when the store does not hold the document; 409 for a store attached to an
    existing table (it has no chunks of its own). Pass `nextCursor` back as `cursor` for the next page; it
    is null on the last one.
    """
    page, next_cursor = await run_in_threadpool(
        documents.list_chunks, store, document_id, limit, cursor, grant
    )
    return ChunkListResponse(
        document_id=document_id, chunks=[_chunk_item(c) for c in page], next_cursor=next_cursor
    )


@router.put(
    "/{store}/documents/{document_id:path}",
    response_model=DocumentWriteResponse,
    responses={201: {"model": DocumentWriteResponse, "description": "Created"}},
    openapi_extra=_errors(413, 415, 422, 502),
)
async def put_document(
    store: Text,
    document_id: Text,
    body: DocumentPutRequest,
    documents: DocumentsDep,
    grant: GrantDep,
    actor: ActorDep,
    table: TableDep,
    request: Request,
    response: Response,
) -> DocumentWriteResponse:
    """Write a document (scope write): 201 created, 200 updated or unchanged (nothing re-embedded).

    A CSV or JSONL file is a row source: one document per record, listed in `documents`, and the
    records it no longer holds in `removed`; the query parameters `textColumn`, `idColumn`, `titleColumn`
    and `metadataColumn` name the columns of each record's parts (a 422 `unknown_column` names the
    columns the file has). The store must exist (PUT it first: 404 otherwise).
    A client that goes away while its file is read stops the reading (nothing is written).
    """
    source = _source_input(body, document_id, table)
    cancelled = threading.Event()
    watcher = asyncio.create_task(_cancel_when_gone(request, cancelled))
    try:
        written = await run_in_threadpool(
            documents.write_source, store, source, grant, actor=actor, cancelled=cancelled
        )
    finally:
        watcher.cancel()
    records = written.content_type in ROW_FORMATS
    response.status_code = status.HTTP_201_CREATED if written.status == "created" else status.HTTP_200_OK
    return _write_response(document_id, written, records)


@router.get("/{store}/documents/{document_id:path}", response_model=DocumentResponse, openapi_extra=_errors())
async def get_document(
    store: Text, document_id: Text, documents: DocumentsDep, grant: GrantDep
) -> DocumentResponse:
    """One document without its chunks (scope read); 404 `document_not_found` when absent."""
    return _document_response(await run_in_threadpool(documents.get_document, store, document_id, grant))


@router.delete("/{store}/documents/{document_id:path}", status_code=204, openapi_extra=_errors())
async def delete_document(
    store: Text, document_id: Text, documents: DocumentsDep, grant: GrantDep, actor: ActorDep
) -> Response:
    """Delete the document, or every record of the row source of that id (scope write); 404 when absent."""
    deleted = await run_in_threadpool(documents.delete_source, store, document_id, grant, actor=actor)
    if not deleted:
        raise DocumentNotFoundError(store, document_id)
    return Response(status_code=204)


@router.delete("/{store}/documents", status_code=204, openapi_extra=_errors(422))
async def delete_document_by_query(
    store: Text,
    documents: DocumentsDep,
    grant: GrantDep,
    actor: ActorDep,
    document_id: Annotated[Text, Query(alias="documentId", min_length=1, max_length=1024)],
) -> Response:
    """Delete the document `documentId`, as DELETE /{store}/documents/{documentId} does (scope write); 404
    when absent.

    The id travels as a query parameter, which no URL resolves: the route for ids a path cannot carry,
    such as `..`, stored before such ids were refused.
    """
    return await delete_document(store, document_id, documents, grant, actor)


async def _cancel_when_gone(request: Request, cancelled: threading.Event) -> None:
    """Set `cancelled` once the client has disconnected (the write's checkpoints then stop it)."""
    while not await request.is_disconnected():
        await asyncio.sleep(DISCONNECT_POLL_S)
    cancelled.set()


# The HTTP bodies and the write side's own values, each way.


def _source_request(block: SourceBlock) -> SourceRequest:
    """The SourceRequest of a store's `source` block (a 422 naming the field when something is missing)."""
    columns = block.columns.model_dump(exclude_none=True, by_alias=True) if block.columns else None
    return source_request(
        block.table,
        columns,
        schema=block.schema_name,
        distance=block.distance,
        dimension=block.dimension,
        embedding_model=block.embedding_model,
        preset=block.preset,
        collection=block.collection,
        text_search=block.text_search or "english",
        add_fulltext=block.add_fulltext,
        writable=block.writable,
    )


def _chunking(pipeline: PipelineOptions | None) -> Chunking | None:
    """The store's own chunking a PUT names; None when it names none."""
    if pipeline is None or pipeline.chunking is None:
        return None
    options = pipeline.chunking
    return Chunking(options.strategy, options.size, options.overlap)


def _pipeline(info: StoreInfo) -> PipelineSettings | None:
    """The store's pipeline as it applies: its own chunking, or the deployment's; None when attached."""
    if info.source is not None:
        return None
    if info.chunking is not None:
        chunking = ChunkingSettings(**info.chunking.as_json(), own=True)
    else:
        settings = get_settings()
        chunking = ChunkingSettings(
            strategy="fixed", size=settings.chunk_size, overlap=settings.chunk_overlap, own=False
        )
    return PipelineSettings(
        embedder=EmbedderSettings(model=info.embedding_model, dimension=info.dimension), chunking=chunking
    )


def _store_response(info: StoreInfo) -> StoreResponse:
    """A store as the service shows it, as the HTTP body."""
    keys = list(info.allowed_metadata_keys) if info.allowed_metadata_keys is not None else None
    return StoreResponse(
        name=info.name,
        display_name=info.display_name,
        storage=info.storage,
        embedding_model=info.embedding_model,
        dimension=info.dimension,
        allowed_metadata_keys=keys,
        text_search=info.text_search,
        document_count=info.document_count,
        chunk_count=info.chunk_count,
        pipeline=_pipeline(info),
        source=info.source,
        features=info.features,
    )


def _source_input(body: DocumentPutRequest, document_id: str, table: TableOptions) -> SourceInput:
    """The SourceInput of a PUT body and its table options; a 422 naming `content` when it is not base64."""
    if body.text is not None:
        return SourceInput(
            document_id,
            body.text.encode("utf-8"),
            body.content_type or "text/plain",
            body.file_name,
            body.metadata,
            table,
        )
    try:
        data = base64.b64decode(body.content or "", validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError.for_field("content", "is not valid base64", "base64") from None
    return SourceInput(document_id, data, body.content_type, body.file_name, body.metadata, table)


def _write_response(document_id: str, written: SourceWrite, records: bool) -> DocumentWriteResponse:
    """What a write did, as the HTTP body; `records` adds the per-record lists."""
    items = [
        DocumentWriteItem(
            document_id=d.document_id,
            status=d.status,
            chunk_count=d.chunk_count,
            duplicate_of=list(d.duplicate_of),
        )
        for d in written.documents
    ]
    return DocumentWriteResponse(
        document_id=document_id,
        status=written.status,
        chunk_count=written.chunk_count,
        content_sha256=written.content_sha256,
        content_type=written.content_type,
        documents=items if records else None,
        removed=list(written.removed) if records else None,
        duplicate_of=written.duplicate_of,
    )


def _document_response(info: DocumentInfo) -> DocumentResponse:
    """A stored document, as the HTTP body."""
    return DocumentResponse(
        document_id=info.id,
        source=info.source,
        title=info.title,
        metadata=info.metadata,
        content_type=info.content_type,
        content_sha256=info.content_sha256,
        chunk_count=info.chunk_count,
        created_at=info.created_at,
        updated_at=info.updated_at,
        written_by=info.written_by,
    )


def _chunk_item(chunk: ChunkInfo) -> ChunkItem:
    """A stored chunk, as the HTTP body: `pageNumber` and `section` lifted from its metadata when they are
    what the parsers write there (an integer page, a text heading path)."""
    page = chunk.metadata.get("pageNumber")
    section = chunk.metadata.get("section")
    return ChunkItem(
        id=chunk.id,
        chunk_index=chunk.chunk_index,
        content=chunk.content,
        metadata=chunk.metadata,
        page_number=page if isinstance(page, int) and not isinstance(page, bool) else None,
        section=section if isinstance(section, str) else None,
    )
