"""Prompt-ready context (`returnFormatted`): each chunk with a citation header, and the results packed
into one numbered `context` string within a token budget, near-duplicates left out. No I/O but the
first token count, which loads the tokenizer (token_count.py).

The format is stable (docs/api.md "Prompt-ready context"):

    formattedContent:  Source: <document>[ (<fileName>)][, page <n>][, section <s>]\\n<chunk text>
    context:           [1] <formattedContent of the first chunk packed>\\n\\n[2] <...>

Chunks are packed in result order. A chunk whose word 3-shingles overlap those of a chunk already packed
with Jaccard similarity of at least NEAR_DUPLICATE_JACCARD is left out (it gets no `citation`), as is
one that would take the context past `maxContextTokens` (a later, shorter chunk may still fit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from retrieval_core.schemas.retrieve import RetrieveRequest, RetrieveResponse
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest, SimilaritySearchResponse
from retrieval_core.search.token_count import TokenCounter, token_counter

SEPARATOR = "\n\n"
SHINGLE_WORDS = 3
# Two chunks of 150 words sharing all but about 4 scattered word changes; neighbouring chunks of a
# document, which share the chunker's overlap (150 of 1,000 characters by default), stay well below it.
NEAR_DUPLICATE_JACCARD = 0.8
_WORD = re.compile(r"\w+")


def citation_header(metadata: Mapping[str, Any]) -> str:
    """`Source: <document>[ (<fileName>)][, page <n>][, section <s>]` from a chunk's metadata."""
    file_name = _text(metadata.get("fileName"))
    document = (
        _text(metadata.get("title"))
        or _text(metadata.get("documentName"))
        or file_name
        or _text(metadata.get("documentId"))
    )
    header = f"Source: {document}"
    if file_name and file_name != document:
        header += f" ({file_name})"
    page = metadata.get("pageNumber")
    if isinstance(page, int) and not isinstance(page, bool):
        header += f", page {page}"
    section = _text(metadata.get("section"))
    if section:
        header += f", section {section}"
    return header


def _text(value: Any) -> str:
    # A header is one line: a title with newlines or runs of spaces is collapsed.
    return " ".join(value.split()) if isinstance(value, str) else ""


def shingles(text: str) -> frozenset[int]:
    """Hashes of the text's lowercased word 3-grams (of the whole word sequence when it is shorter)."""
    words = _WORD.findall(text.lower())
    if len(words) <= SHINGLE_WORDS:
        return frozenset({hash(tuple(words))})
    # The shifted lists end together, at the last whole 3-gram.
    return frozenset(map(hash, zip(*(words[i:] for i in range(SHINGLE_WORDS)), strict=False)))


def jaccard(a: frozenset[int], b: frozenset[int]) -> float:
    """|a ∩ b| / |a ∪ b|; 1.0 for two empty sets."""
    common = len(a & b)
    union = len(a) + len(b) - common
    return common / union if union else 1.0


def near_duplicate(a: frozenset[int], b: frozenset[int]) -> bool:
    """Whether two shingle sets are at least NEAR_DUPLICATE_JACCARD alike."""
    # Jaccard is at most the smaller size over the larger: most pairs are told apart without a set op.
    smaller, larger = sorted((len(a), len(b)))
    if smaller < NEAR_DUPLICATE_JACCARD * larger:
        return False
    return jaccard(a, b) >= NEAR_DUPLICATE_JACCARD


@dataclass(frozen=True)
class PackedContext:
    """The packed `context`, its token count, and each chunk's citation number (None: left out)."""

    text: str
    tokens: int
    citations: list[int | None]


def pack(
    contents: Sequence[str],
    headers: Sequence[str],
    counter: TokenCounter,
    max_tokens: int | None = None,
) -> PackedContext:
    """`[n] <header>\\n<content>` entries in order, without near-duplicates and what exceeds `max_tokens`.

    An entry's tokens are those of `[n] <header>` plus those of its content: the counters split on
    whitespace first, so the parts of a text joined by whitespace count what the text does (the model's
    tokenizer) or more (the estimate), and the total never exceeds `max_tokens`.
    """
    kept: list[frozenset[int]] = []
    candidates: list[int] = []
    for index, content in enumerate(contents):
        grams = shingles(content)
        if any(near_duplicate(grams, other) for other in kept):
            continue
        kept.append(grams)
        candidates.append(index)
    content_tokens = dict(zip(candidates, counter.count([contents[i] for i in candidates]), strict=True))
    separator = counter.count([SEPARATOR])[0]
    citations: list[int | None] = [None] * len(contents)
    entries: list[str] = []
    used = 0
    for index in candidates:
        label = f"[{len(entries) + 1}] {headers[index]}"
        cost = counter.count([label])[0] + content_tokens[index] + (separator if entries else 0)
        if max_tokens is not None and used + cost > max_tokens:
            continue
        used += cost
        entries.append(f"{label}\n{contents[index]}")
        citations[index] = len(entries)
    return PackedContext(SEPARATOR.join(entries), used, citations)


Answer = TypeVar("Answer", RetrieveResponse, SimilaritySearchResponse)


def with_context(answer: Answer, max_tokens: int | None, counter: TokenCounter) -> Answer:
    """A copy of `answer` with each result's `formattedContent` and `citation`, and the packed `context`."""
    headers = [citation_header(r.metadata) for r in answer.results]
    packed = pack([r.content for r in answer.results], headers, counter, max_tokens)
    results = [
        r.model_copy(update={"formatted_content": f"{header}\n{r.content}", "citation": citation})
        for r, header, citation in zip(answer.results, headers, packed.citations, strict=True)
    ]
    return answer.model_copy(
        update={
            "results": results,
            "context": packed.text,
            "context_tokens": packed.tokens,
            "context_tokenizer": counter.name,
        }
    )


def formatted_if_asked(answer: Answer, request: RetrieveRequest | SimilaritySearchRequest) -> Answer:
    """`answer` as `with_context` makes it when the request has returnFormatted, else unchanged.

    Tokens are counted with the tokenizer in LOCAL_MODEL_DIR or the model package (token_count.py).
    """
    if not request.return_formatted:
        return answer
    from retrieval_core.settings import get_settings

    return with_context(answer, request.max_context_tokens, token_counter(get_settings().local_model_dir))
