"""Sources from Gemini's `groundingMetadata`, in the REST JSON (camelCase) shape. Pure: no I/O.

Three shapes of `groundingChunks[]` entries are read:

- `retrievedContext`: File Search (and Vertex RAG): `documentName`, `title`, `text`, `uri`,
  `fileSearchStore`, `customMetadata`, `pageNumber`, `ragChunk`.
- `web`: Google Search grounding: `uri`, `title`, `domain`.
- the legacy Semantic Retriever structures: `chunk` (a `corpora/*/documents/*/chunks/*` resource with
  `data.stringValue` and `customMetadata`) and `chunkData` (`{stringValue}`).

Every chunk is kept, duplicates from one document included: each holds different text. A chunk's
`score` is the highest `confidenceScores` entry among the `groundingSupports` that cite it, and None
when no support does: a score is never invented.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from retrieval_core.schemas.common import GEMINI_STORE_PREFIX
from retrieval_core.schemas.knowledge import KnowledgeSource
from retrieval_core.schemas.results import ChunkResult


def extract_sources(grounding: Mapping[str, Any] | None) -> list[KnowledgeSource]:
    """One source per grounding chunk, in the order Gemini gave them."""
    if not grounding:
        return []
    chunks = grounding.get("groundingChunks") or []
    scores = chunk_scores(grounding.get("groundingSupports") or [], len(chunks))
    sources = []
    for index, chunk in enumerate(chunks):
        source = source_of(chunk) if isinstance(chunk, Mapping) else None
        if source is not None:
            source.score = scores.get(index)
            sources.append(source)
    return sources


def chunk_scores(supports: list[Any], chunk_count: int) -> dict[int, float]:
    """Chunk index -> the highest confidence any support citing it gives; chunks no support scores are absent.

    `confidenceScores[i]` belongs to `groundingChunkIndices[i]`.
    """
    best: dict[int, float] = {}
    for support in supports:
        if not isinstance(support, Mapping):
            continue
        indices = support.get("groundingChunkIndices") or []
        confidences = support.get("confidenceScores") or []
        for index, confidence in zip(indices, confidences, strict=False):
            if not isinstance(index, int) or not 0 <= index < chunk_count:
                continue
            if not isinstance(confidence, int | float) or isinstance(confidence, bool):
                continue
            best[index] = max(best.get(index, float("-inf")), float(confidence))
    return best


def source_of(chunk: Mapping[str, Any]) -> KnowledgeSource | None:
    """The source one grounding chunk describes; None for a shape this service does not know."""
    if isinstance(context := chunk.get("retrievedContext"), Mapping):
        return _retrieved_context(context)
    if isinstance(web := chunk.get("web"), Mapping):
        return KnowledgeSource(
            document_name=_str(web.get("title")),
            uri=_str(web.get("uri")),
            metadata={"domain": web["domain"]} if _str(web.get("domain")) else {},
        )
    if isinstance(legacy := chunk.get("chunk"), Mapping):
        return _legacy_chunk(legacy, chunk.get("chunkData"))
    if isinstance(data := chunk.get("chunkData"), Mapping):
        return KnowledgeSource(chunk=_str(data.get("stringValue")) or _str(data.get("text")))
    return None


def _retrieved_context(context: Mapping[str, Any]) -> KnowledgeSource:
    rag_chunk = _mapping(context.get("ragChunk"))
    page_span = _mapping(rag_chunk.get("pageSpan"))
    document = _str(context.get("documentName"))
    store = _str(context.get("fileSearchStore")) or _store_of(document)
    page = context.get("pageNumber")
    if not isinstance(page, int):
        page = page_span.get("firstPage") if isinstance(page_span.get("firstPage"), int) else None
    return KnowledgeSource(
        document_id=document or _str(rag_chunk.get("fileId")),
        document_name=_str(context.get("title")),
        uri=_str(context.get("uri")),
        chunk=_str(context.get("text")) or _str(rag_chunk.get("text")),
        store_name=store,
        metadata=custom_metadata(context.get("customMetadata")),
        page_number=page,
    )


def _legacy_chunk(chunk: Mapping[str, Any], chunk_data: Any) -> KnowledgeSource:
    name = _str(chunk.get("name"))
    data = chunk.get("data") if isinstance(chunk.get("data"), Mapping) else chunk_data
    text = (
        (_str(data.get("stringValue")) or _str(data.get("text"))) if isinstance(data, Mapping) else None
    ) or _str(chunk.get("text"))
    document = name.split("/chunks/", 1)[0] if name and "/chunks/" in name else _str(chunk.get("document"))
    store = "/".join(document.split("/")[:2]) if document and document.startswith("corpora/") else None
    return KnowledgeSource(
        document_id=document,
        document_name=_str(chunk.get("title")) or _str(chunk.get("displayName")),
        uri=_str(chunk.get("uri")),
        chunk=text,
        store_name=store,
        metadata=custom_metadata(chunk.get("customMetadata")),
    )


def custom_metadata(entries: Any) -> dict[str, Any]:
    """`[{key, stringValue | numericValue | stringListValue: {values}}]` as a plain dict."""
    metadata: dict[str, Any] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(key := entry.get("key"), str):
            continue
        if "stringValue" in entry:
            metadata[key] = entry["stringValue"]
        elif "numericValue" in entry:
            metadata[key] = entry["numericValue"]
        elif isinstance(entry.get("stringListValue"), Mapping):
            metadata[key] = list(entry["stringListValue"].get("values") or [])
    return metadata


def _store_of(document: str | None) -> str | None:
    # fileSearchStores/{store}/documents/{document}
    if document and document.startswith(GEMINI_STORE_PREFIX) and "/documents/" in document:
        return document.split("/documents/", 1)[0]
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def chunk_results(sources: list[KnowledgeSource]) -> list[ChunkResult]:
    """Sources in the retrieve response shape; ids number each document's chunks in this answer."""
    seen: dict[str, int] = {}
    results = []
    for source in sources:
        document = source.document_id or source.uri or source.document_name or "chunk"
        index = seen.get(document, 0)
        seen[document] = index + 1
        extra = {
            "documentId": document,
            "chunkIndex": index,
            "documentName": source.document_name,
            "uri": source.uri,
            "storeName": source.store_name,
            "pageNumber": source.page_number,
        }
        results.append(
            ChunkResult(
                id=f"{document}#{index}",
                content=source.chunk or "",
                score=source.score,
                metadata={**source.metadata, **{k: v for k, v in extra.items() if v is not None}},
            )
        )
    return results
