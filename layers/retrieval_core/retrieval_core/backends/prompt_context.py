"""An answer with its prompt-ready context (`returnFormatted`), on every backend alike.

The packing itself is search/context_packing.py; this applies it to a retrieve or similarity-search
answer, counting tokens with the tokenizer in LOCAL_MODEL_DIR or the model package (token_count.py).
Both are imported by the first answer that asks for its context, not at a handler's cold start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from retrieval_core.settings import get_settings

if TYPE_CHECKING:
    from retrieval_core.schemas.retrieve import RetrieveRequest, RetrieveResponse
    from retrieval_core.schemas.similarity_search import SimilaritySearchRequest, SimilaritySearchResponse
    from retrieval_core.search.token_count import TokenCounter

Answer = TypeVar("Answer", "RetrieveResponse", "SimilaritySearchResponse")


def with_context(answer: Answer, max_tokens: int | None, counter: TokenCounter) -> Answer:
    """A copy of `answer` with each result's `formattedContent` and `citation`, and the packed `context`."""
    from retrieval_core.search.context_packing import citation_header, pack

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
    from retrieval_core.search.token_count import token_counter

    return with_context(answer, request.max_context_tokens, token_counter(get_settings().local_model_dir))
