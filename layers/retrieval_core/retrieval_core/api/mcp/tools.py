"""The MCP tools: their arguments, descriptions and what a call does. Pure retrieval core, no `mcp` import.

Each call goes through the same services as the HTTP routes (retrieval_core.backends.pgvector.service and
documents.service) with the caller's grant, so answers, errors and the cache behave alike. A call's
problem is a RetrievalError, which the server turns into a tool error (docs/mcp.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator, Field, ValidationError

from retrieval_core.documents.cursors import DEFAULT_PAGE, MAX_CURSOR, MAX_PAGE, MAX_STORE_PREFIX
from retrieval_core.documents.models import Actor, SourceInput
from retrieval_core.exceptions import DocumentNotFoundError
from retrieval_core.filters.exceptions import FilterKeyNotAllowedError
from retrieval_core.filters.predicate import MetadataValue
from retrieval_core.filters.string_form import memory_filter
from retrieval_core.grants import Grant, Scope
from retrieval_core.schemas.answer import AnswerRequest
from retrieval_core.schemas.common import (
    MAX_DOCUMENT_ID_BYTES,
    RequestModel,
    StoreName,
    Text,
    validation_error,
)
from retrieval_core.schemas.common import document_id as _document_id
from retrieval_core.schemas.retrieve import RetrieveRequest
from retrieval_core.schemas.search_options import MetadataEqualities

if TYPE_CHECKING:
    from retrieval_core.backends.pgvector.service import RetrievalService
    from retrieval_core.db.stores import Store
    from retrieval_core.schemas.results import ChunkResult

MEMORY_CONTENT_TYPE = "text/plain"
# Ids derived from the text: a retried memory_store lands on the same memory.
DERIVED_ID_PREFIX = "mem-"

MemoryId = Annotated[
    str,
    Field(min_length=1, max_length=MAX_DOCUMENT_ID_BYTES),
    AfterValidator(_document_id),
]
StoreArgument = Annotated[
    StoreName | None,
    Field(
        default=None, description="Store name or display name (list_stores); the service's default if unset."
    ),
]


class MemorySearchArguments(RequestModel):
    """memory_search: an agent memory's search request, plus `store`."""

    query: Text = Field(min_length=1, max_length=8000, description="What to look for, in natural language.")
    limit: int = Field(default=5, ge=1, le=50, description="Most memories to return (default 5, at most 50).")
    filter: MetadataEqualities | None = Field(
        default=None,
        description="Metadata equalities, all of which must hold. A string value also matches a number or "
        'boolean whose string form is equal ("2024" matches 2024, "true" matches true); a number or '
        "boolean matches that typed value only.",
    )
    store: StoreArgument = None


class MemoryStoreArguments(RequestModel):
    """memory_store: an agent memory's store request, plus `store`."""

    text: Text = Field(min_length=1, max_length=100_000, description="The text to remember.")
    metadata: dict[Annotated[str, Field(min_length=1, max_length=256)], MetadataValue] = Field(
        default_factory=dict,
        description="Key-value metadata stored with the text (strings, numbers or booleans), usable in "
        "memory_search's filter. Stores may restrict the keys (list_stores: allowedMetadataKeys).",
    )
    id: MemoryId | None = Field(
        default=None,
        description="Id of the memory. Given: the memory with that id is replaced (upsert). Omitted: the "
        "id is derived from the text, so storing the same text again changes nothing.",
    )
    store: StoreArgument = None


class MemoryDeleteArguments(RequestModel):
    """memory_delete."""

    id: MemoryId = Field(
        description="Id of the memory to delete (memory_store's id, or memory_search's documentId)."
    )
    store: StoreArgument = None


class ListStoresArguments(RequestModel):
    """list_stores: a page of stores, by name prefix."""

    prefix: Text = Field(
        default="",
        max_length=MAX_STORE_PREFIX,
        description="Only stores whose name (not display name) starts with this; empty: every store.",
    )
    limit: int = Field(
        default=DEFAULT_PAGE,
        ge=1,
        le=MAX_PAGE,
        description=f"Most stores to return (default {DEFAULT_PAGE}, at most {MAX_PAGE}), in name order.",
    )
    cursor: str | None = Field(
        default=None,
        max_length=MAX_CURSOR,
        description="nextCursor of the previous call, for the next page; omit for the first page.",
    )


@dataclass(frozen=True)
class Tool:
    """One tool: its name, what the caller's grant needs, its arguments' model, and its call."""

    name: str
    title: str
    description: str
    scope: Scope
    arguments: type[RequestModel]
    run: Callable[[Any, Grant, Actor], dict[str, Any]]  # arguments, grant, who changes things (audit)
    read_only: bool = True
    destructive: bool = False
    idempotent: bool = True

    def input_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments, as tools/list shows it."""
        schema = self.arguments.model_json_schema(by_alias=True)
        schema.pop("title", None)
        return schema


def call_tool(
    tool: Tool, arguments: Mapping[str, Any] | None, grant: Grant, request_id: str | None = None
) -> dict[str, Any]:
    """Validate `arguments` (a 422-shaped InvalidRequestError naming the field) and run the tool; its
    changes are audited under the grant's name and `request_id` (the HTTP request carrying the call)."""
    try:
        parsed = tool.arguments.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        raise validation_error(exc) from None
    return tool.run(parsed, grant, Actor(grant.name, request_id))


def tools_for(grant: Grant) -> list[Tool]:
    """The tools a grant can use: read tools with the read scope, write tools with the write scope."""
    return [tool for tool in TOOLS.values() if grant.has_scope(tool.scope)]


def memory_id(text: str) -> str:
    """The id memory_store gives a text stored without one."""
    return DERIVED_ID_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# The calls. Services are looked up per call: built on first use, never at import.


def _memory_search(args: MemorySearchArguments, grant: Grant, _actor: Actor) -> dict[str, Any]:
    from retrieval_core.container import get_service

    request = RetrieveRequest.model_validate(
        {
            "query": args.query,
            # Every candidate, nearest first, none reranked away: "up to limit by similarity".
            "grade": 0.0,
            "engineName": "naive",
            "similarityTopK": args.limit,
            "metadataFilter": memory_filter(args.filter),
            "store": args.store,
            "backend": "pgvector",
        }
    )
    try:
        response, _ = get_service().retrieve(request, grant=grant)
    except FilterKeyNotAllowedError as exc:
        raise FilterKeyNotAllowedError(
            exc.details["key"], frozenset(exc.details["allowedKeys"]), "filter"
        ) from None
    results = [_memory_hit(r) for r in response.results]
    return {"results": results, "count": len(results), "store": response.store}


def _memory_hit(chunk: ChunkResult) -> dict[str, Any]:
    """One memory_search result: the chunk's ids and place as the HTTP API gives them, then its text."""
    hit: dict[str, Any] = {
        "id": chunk.id,
        "documentId": chunk.metadata["documentId"],
        "chunkIndex": chunk.metadata["chunkIndex"],
    }
    if (page := chunk.metadata.get("pageNumber")) is not None:
        hit["page"] = page
    return {
        **hit,
        "content": chunk.content,
        "metadata": {k: v for k, v in chunk.metadata.items() if k not in ("documentId", "chunkIndex")},
        "similarity": chunk.score,
    }


def _memory_store(args: MemoryStoreArguments, grant: Grant, actor: Actor) -> dict[str, Any]:
    from retrieval_core.container import get_document_service

    documents = get_document_service()
    store = _writable_store(documents.retrieval, args.store, grant)
    allowed = documents.retrieval.allowed_keys_for(store)
    refused = sorted(set(args.metadata) - allowed) if allowed is not None else []
    if refused:
        raise FilterKeyNotAllowedError(refused[0], allowed or frozenset(), "metadata")
    memory = args.id or memory_id(args.text)
    source = SourceInput(
        source_id=memory,
        data=args.text.encode("utf-8"),
        content_type=MEMORY_CONTENT_TYPE,
        metadata=dict(args.metadata),
    )
    written = documents.write_source(store.name, source, grant, actor=actor)
    return {
        "id": memory,
        "store": store.name,
        "status": written.status,
        "chunkCount": written.chunk_count,
        "duplicateOf": written.duplicate_of,
    }


def _memory_delete(args: MemoryDeleteArguments, grant: Grant, actor: Actor) -> dict[str, Any]:
    from retrieval_core.container import get_document_service

    documents = get_document_service()
    store = _writable_store(documents.retrieval, args.store, grant)
    if not documents.delete_source(store.name, args.id, grant, actor=actor, own_source=True):
        raise DocumentNotFoundError(store.name, args.id)
    return {"id": args.id, "store": store.name, "deleted": True}


def _retrieve(args: RetrieveRequest, grant: Grant, _actor: Actor) -> dict[str, Any]:
    from retrieval_core.container import get_backends

    answer, _ = get_backends().retrieve(args, grant, caller="mcp")
    return answer.model_dump(mode="json", by_alias=True)


def _answer(args: AnswerRequest, grant: Grant, _actor: Actor) -> dict[str, Any]:
    from retrieval_core.backends.answers import final_answer
    from retrieval_core.container import get_backends

    events, _ = get_backends().answer(args, grant, caller="mcp")
    return final_answer(events).model_dump(mode="json", by_alias=True)


def _list_stores(args: ListStoresArguments, grant: Grant, _actor: Actor) -> dict[str, Any]:
    from retrieval_core.container import get_document_service

    documents = get_document_service()
    allowed = documents.retrieval.allowed_metadata_keys
    stores = []
    page, next_cursor = documents.list_stores(args.prefix, args.limit, args.cursor, grant)
    for info in page:
        keys = info.allowed_metadata_keys
        if keys is not None and allowed is not None:
            keys = tuple(k for k in keys if k in allowed)
        elif keys is None and allowed is not None:
            keys = tuple(sorted(allowed))
        stores.append(
            {
                "name": info.name,
                "displayName": info.display_name,
                "documentCount": info.document_count,
                "chunkCount": info.chunk_count,
                "allowedMetadataKeys": list(keys) if keys is not None else None,
            }
        )
    return {"stores": stores, "nextCursor": next_cursor, "defaultStore": documents.retrieval.default_store}


def _writable_store(service: RetrievalService, name: str | None, grant: Grant) -> Store:
    # The scope first (403), then the store: one outside the grant answers as an unknown one (404).
    grant.require_scope("write")
    store = service.get_store(name)
    grant.require_store(store.name, name or store.name)
    return store


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in (
        Tool(
            name="memory_search",
            title="Search memory",
            description="Find stored memories (text with metadata) most similar in meaning to `query`, "
            "highest similarity first. Results are chunks: each has id (the chunk's, documentId#chunkIndex), "
            "documentId (the memory's id, which memory_delete takes), chunkIndex, page (a PDF page, when "
            "known), content, metadata and similarity (1 - cosine distance: higher is more similar, at most "
            "1). `filter` keeps only memories whose "
            "metadata holds every given key-value pair.",
            scope="read",
            arguments=MemorySearchArguments,
            run=_memory_search,
        ),
        Tool(
            name="memory_store",
            title="Store a memory",
            description="Store `text` with optional `metadata` so that memory_search finds it at once. "
            "With `id`, the memory of that id is replaced; without it, the id is derived from the text, "
            "so retrying the same call never stores it twice. Returns the id, whether it was "
            "created, updated or unchanged, and duplicateOf: the ids of other memories with the same text "
            "(memory_search shows one of them). Needs the write scope.",
            scope="write",
            arguments=MemoryStoreArguments,
            run=_memory_store,
            read_only=False,
        ),
        Tool(
            name="memory_delete",
            title="Delete a memory",
            description="Delete the memory with `id` from the store. An unknown id is an error "
            "(document_not_found); so is the id of a record of a CSV or JSON Lines file "
            "(document_of_another_source, naming the file). Needs the write scope.",
            scope="write",
            arguments=MemoryDeleteArguments,
            run=_memory_delete,
            read_only=False,
            destructive=True,
        ),
        Tool(
            name="retrieve",
            title="Retrieve chunks (full request)",
            description="The service's full retrieval request (the HTTP API's POST /api/v1/rag/retrieve): "
            "`query` is required, and `grade` (minimum similarity 0-1) except in keyword mode; options "
            "include searchMode (vector, hybrid: keyword + vector, keyword: full-text alone, no grade), "
            'similarityTopK, metadataFilter (equalities, or an expression such as "year >= 2023 AND NOT '
            'draft = true"), docIds, rerank, store. Returns ranked chunks with scores (similarities, '
            "higher is better; keywordScore and matchedTerms in hybrid and keyword modes) and the pipeline "
            "that produced them.",
            scope="read",
            arguments=RetrieveRequest,
            run=_retrieve,
        ),
        Tool(
            name="answer",
            title="Answer from the documents, with citations",
            description="The HTTP API's POST /api/v1/rag/answer: retrieves as `retrieve` does (`query` and "
            "`grade` required but in keyword mode; searchMode, similarityTopK, metadataFilter, docIds, "
            "rerank, store) and writes an answer from the chunks found. Returns text, citations (each a "
            "span of text with the chunk and document ids it stands on), sources (the chunks given to the "
            "model), grounded (false when nothing passed `grade`, in which case no model is called and text "
            "is empty, or when the answer cites nothing) and the pipeline. systemInstruction, "
            "maxOutputTokens and model shape the answer.",
            scope="read",
            arguments=AnswerRequest,
            run=_answer,
        ),
        Tool(
            name="list_stores",
            title="List stores",
            description="The stores this credential may read, in name order, a page at a time, with their "
            "document and chunk counts and the metadata keys each allows (null: any key), and the store "
            "used when a tool names none. `prefix` keeps the stores whose name starts with it; while "
            "`nextCursor` is not null, pass it as `cursor` for the next page.",
            scope="read",
            arguments=ListStoresArguments,
            run=_list_stores,
        ),
    )
}
