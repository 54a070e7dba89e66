"""Prompt-ready context (`returnFormatted`): each chunk with a citation header, and the results packed
into one numbered `context` string within a token budget, near-duplicates left out. Pure: no I/O.

The format is stable (docs/api.md "Prompt-ready context"):

    formattedContent:  Source: <document>[ (<fileName>)][, page <n>][, section <s>]\\n<chunk text>
    context:           [1] <formattedContent of the first chunk packed>\\n\\n[2] <...>

Chunks are packed in result order. A chunk whose word 3-shingles overlap those of a chunk already packed
with Jaccard similarity of at least NEAR_DUPLICATE_JACCARD is left out (its `citation` is null), as is
one that would take the context past `maxContextTokens` (a later, shorter chunk may still fit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .models import RetrieveRequest, RetrieveResponse, SimilaritySearchRequest, SimilaritySearchResponse
from .token_count import TokenCounter, token_counter

SEPARATOR = "\n\n"
SHINGLE_WORDS = 3
# Two chunks of 150 words sharing all but about 4 scattered word changes; chunks that share only the
# chunker's overlap (at most 20% of each) stay well below it.
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


def format_chunk(content: str, metadata: Mapping[str, Any]) -> str:
    """A chunk's `formattedContent`: its citation header, a newline, then its text."""
    return f"{citation_header(metadata)}\n{content}"


def shingles(text: str) -> frozenset[tuple[str, ...]]:
    """The text's word 3-grams, lowercased (the whole word sequence when it is shorter)."""
    words = tuple(w.lower() for w in _WORD.findall(text))
    if len(words) <= SHINGLE_WORDS:
        return frozenset({words})
    return frozenset(words[i : i + SHINGLE_WORDS] for i in range(len(words) - SHINGLE_WORDS + 1))


def jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    """|a ∩ b| / |a ∪ b|; 1.0 for two empty sets."""
    union = len(a | b)
    return len(a & b) / union if union else 1.0


@dataclass(frozen=True)
class PackedContext:
    """The packed `context`, its token count, and each chunk's citation number (None: left out)."""

    text: str
    tokens: int
    citations: list[int | None]


def pack(
    contents: Sequence[str],
    formatted: Sequence[str],
    counter: TokenCounter,
    max_tokens: int | None = None,
) -> PackedContext:
    """Number and join `formatted` in order, leaving out near-duplicates and whatever exceeds `max_tokens`.

    Near-duplicates are judged on `contents` (the chunk texts, without headers). The token count is
    that of the whole returned text, never more than `max_tokens`.
    """
    kept: list[frozenset[tuple[str, ...]]] = []
    candidates: list[int] = []
    for index, content in enumerate(contents):
        grams = shingles(content)
        if any(jaccard(grams, other) >= NEAR_DUPLICATE_JACCARD for other in kept):
            continue
        kept.append(grams)
        candidates.append(index)
    entries = {i: f"[{n}] {formatted[i]}" for n, i in enumerate(candidates, start=1)}
    if max_tokens is None:
        return _numbered(formatted, candidates, counter)
    # Fit by the entries' own counts plus the separators', then renumber and count the whole text:
    # citations change the digits, so the final count decides, dropping the last entry while over.
    sizes = dict(zip(entries, counter.count(list(entries.values())), strict=True))
    separator = counter.count([SEPARATOR])[0]
    chosen: list[int] = []
    used = 0
    for index in candidates:
        cost = sizes[index] + (separator if chosen else 0)
        if used + cost <= max_tokens:
            chosen.append(index)
            used += cost
    while True:
        packed = _numbered(formatted, chosen, counter)
        if packed.tokens <= max_tokens:
            return packed
        chosen.pop()


def _numbered(formatted: Sequence[str], chosen: list[int], counter: TokenCounter) -> PackedContext:
    citations: list[int | None] = [None] * len(formatted)
    entries = []
    for n, index in enumerate(chosen, start=1):
        citations[index] = n
        entries.append(f"[{n}] {formatted[index]}")
    text = SEPARATOR.join(entries)
    return PackedContext(text, counter.count([text])[0] if text else 0, citations)


Answer = TypeVar("Answer", RetrieveResponse, SimilaritySearchResponse)


def with_context(answer: Answer, max_tokens: int | None, counter: TokenCounter) -> Answer:
    """A copy of `answer` with each result's `formattedContent` and `citation`, and the packed `context`."""
    formatted = [format_chunk(r.content, r.metadata) for r in answer.results]
    packed = pack([r.content for r in answer.results], formatted, counter, max_tokens)
    results = [
        r.model_copy(update={"formatted_content": text, "citation": citation})
        for r, text, citation in zip(answer.results, formatted, packed.citations, strict=True)
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
    from .settings import get_settings

    return with_context(answer, request.max_context_tokens, token_counter(get_settings().local_model_dir))
