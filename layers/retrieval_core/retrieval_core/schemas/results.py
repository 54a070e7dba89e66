"""What a search returns for each chunk, and the notes of the packed context both answers describe."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from retrieval_core.schemas.common import ResponseModel, absent_when_none

SIMILARITY_NOTE = (
    "Similarity, higher is better: 1 - cosine distance between the query and chunk embeddings. "
    "Never a distance."
)
MATCHED_TERMS_NOTE = (
    'searchMode "hybrid" or "keyword" only: the distinct words of `content`, as written there (e.g. '
    '"Refunds", "refunded" for a query "refund"), that the keyword query matches in the store\'s text '
    "search configuration, in the order they first occur; [] when it matches none. A client highlights "
    "whole-word, case-sensitive occurrences of each in `content`. Excluded (-word) terms are not listed; "
    "a quoted phrase's words are listed wherever they occur."
)


class ExpandedSpan(ResponseModel):
    """Where a result expanded with its neighbours comes from (request option `expand`)."""

    first_chunk: int = Field(description="chunkIndex of the first chunk joined into content.")
    last_chunk: int = Field(description="chunkIndex of the last chunk joined into content.")
    match_start: int = Field(description="Offset in content (characters) where the matched chunk starts.")
    match_end: int = Field(description="Offset in content where the matched chunk ends.")


class ChunkResult(ResponseModel):
    """One retrieved chunk, with its metadata."""

    id: str = Field(description="Stable chunk id: documentId#chunkIndex.")
    content: str
    score: float | None = Field(
        description=SIMILARITY_NOTE
        + ' Null in searchMode "keyword", which computes no similarity, and for a Gemini File Search chunk '
        "Gemini gave no score."
    )
    metadata: dict[str, Any] = Field(
        description="Stored chunk metadata plus documentId and chunkIndex; always travels with the text."
    )
    keyword_score: float | None = Field(
        default=None,
        description="Hybrid and keyword modes only: the chunk's keyword score for the query in its store's "
        "text search configuration, BM25 or ts_rank_cd as pipeline.keywordScorer says (higher is better; "
        "null: the keyword query does not match the chunk, or vector mode).",
    )
    fused_score: float | None = Field(
        default=None,
        description="Hybrid only: the fused score the chunk was ranked by, 0-1, higher is better. rrf: "
        "RRF divided by its maximum 2 / (rrfK + 1), so 1 is first in both lists and 0.5 first in one; "
        "weighted: the weighted mean of the two scaled scores. Compared with minFusedScore.",
    )
    rerank_score: float | None = Field(
        default=None, description="Reranked only: the reranker's relevance score, higher is better."
    )
    matched_terms: list[str] | None = Field(
        default=None, exclude_if=absent_when_none, description=MATCHED_TERMS_NOTE
    )
    expanded: ExpandedSpan | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="expand only: the chunks content spans and the matched chunk's place in it.",
    )
    formatted_content: str | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="returnFormatted only: `Source: <document>[ (<fileName>)][, page <n>][, section <s>]`, "
        "a newline, then the text.",
    )
    citation: int | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="returnFormatted only: this chunk's number [n] in `context`; absent when it was left "
        "out (a near-duplicate of an earlier chunk, or over maxContextTokens).",
    )


CONTEXT_NOTE = (
    "returnFormatted only: the results' formattedContent in order, each as `[n] ...`, separated by a "
    "blank line; near-duplicates and chunks over maxContextTokens left out."
)
CONTEXT_TOKENS_NOTE = (
    "returnFormatted only: tokens in `context` (no special tokens), at most maxContextTokens."
)
CONTEXT_TOKENIZER_NOTE = (
    "returnFormatted only: what counted contextTokens: all-MiniLM-L6-v2 (its tokenizer.json), or estimate "
    "(no tokenizer installed: ASCII characters / 3 plus other characters, rounded up)."
)
