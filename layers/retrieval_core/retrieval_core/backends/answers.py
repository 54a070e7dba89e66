"""Grounded answers (POST /api/v1/rag/answer) on a pgvector store or an attached table.

The retrieve picks the sources exactly as POST /rag/retrieve would; when nothing passes its threshold
(`grade`, or `minFusedScore`) no model is called and the answer is empty and not grounded. Otherwise
the sources that fit `maxContextTokens` are numbered into the prompt, the generator writes the answer,
and every citation is checked against the sources it was given. Answers are cached like retrieves
(the store's version is in the key, so a write retires them), under a key that also holds the
generator's provider, model and prompt version.
"""

from __future__ import annotations

import time
from collections import abc
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from retrieval_core.backends.pgvector.response_parts import is_complete
from retrieval_core.backends.prompt_context import with_context
from retrieval_core.cache.json_cache import CacheStatus
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.generation.base import Generation, GenerationRequest, Generator
from retrieval_core.generation.citations import CitedText, MarkerFilter, from_markers, from_native
from retrieval_core.generation.prompt import PROMPT_VERSION, system_text, user_text
from retrieval_core.grants import Grant
from retrieval_core.schemas.answer import (
    AnswerCitation,
    AnswerPipeline,
    AnswerRequest,
    AnswerResponse,
    AnswerTimings,
    UngroundedReason,
)
from retrieval_core.schemas.results import ChunkResult
from retrieval_core.schemas.retrieve import RetrieveResponse
from retrieval_core.search.token_count import TokenCounter

if TYPE_CHECKING:
    from retrieval_core.backends.pgvector.service import RetrievalService

# What an answer yields: pieces of its final text as they are written, then the whole answer, once, last.
AnswerEvent = str | AnswerResponse


def check_model(model: str | None, allowed: frozenset[str], default: str) -> str:
    """The model to answer with: the request's, when the service allows it (422 otherwise), else `default`."""
    if model is None:
        return default
    if model not in allowed:
        listed = ", ".join(sorted(allowed))
        raise InvalidRequestError.for_field(
            "model",
            f"not an allowed model; allowed: {listed} (GENERATION_MODELS_ALLOWED)",
            "not_allowed",
        )
    return model


class Answerer:
    """Writes grounded answers from a pgvector store's retrieves with one generator."""

    def __init__(
        self,
        service: Callable[[], RetrievalService],
        generator: Callable[[], Generator],
        allowed_models: frozenset[str],
        counter: Callable[[], TokenCounter],
    ) -> None:
        # Providers, not instances: building the generator (and its client) waits for the first answer.
        self._service = service
        self._generator = generator
        self.allowed_models = allowed_models
        self._counter = counter

    def answer(
        self, request: AnswerRequest, grant: Grant, *, streaming: bool = False
    ) -> tuple[Iterator[AnswerEvent], CacheStatus]:
        """The answer's events and how the cache served it. Nothing runs before the events are read but
        the checks (scope, model, filter) and the cache lookup: a refused request fails here."""
        grant.require_scope("read")
        service = self._service()
        generator = self._generator()
        model = check_model(request.model, self.allowed_models, generator.model)
        service.where_for(request.doc_ids, request.metadata_filter)  # a bad filter fails before the cache
        identity = {"generator": generator.provider, "model": model, "promptVersion": PROMPT_VERSION}
        slot = service.cache_slot("answer", request, grant, identity=identity)
        if slot.cached is not None:
            cached = AnswerResponse.model_validate(slot.cached)
            return iter([cached.text, cached] if cached.text else [cached]), slot.status

        def events() -> Iterator[AnswerEvent]:
            started = time.perf_counter()
            retrieved, _ = service.retrieve(request.retrieve_request(), grant=grant)
            retrieve_ms = (time.perf_counter() - started) * 1000
            answer = yield from self._written(request, retrieved, generator, model, streaming)
            answer.pipeline.timings_ms = AnswerTimings(
                retrieve=round(retrieve_ms, 2),
                generate=answer.pipeline.timings_ms.generate,
                total=round((time.perf_counter() - started) * 1000, 2),
            )
            if is_complete(retrieved):
                slot.put(answer.model_dump(mode="json", by_alias=True))
            yield answer

        return events(), slot.status

    def _written(
        self,
        request: AnswerRequest,
        retrieved: RetrieveResponse,
        generator: Generator,
        model: str,
        streaming: bool,
    ) -> abc.Generator[str, None, AnswerResponse]:
        """Yields the text as it is written; returns the answer (without its retrieve and total times)."""
        given = sources_given(retrieved, request.context_tokens, self._counter())
        pipeline = AnswerPipeline(
            backend="pgvector",
            provider=generator.provider,
            model=model,
            prompt_version=PROMPT_VERSION,
            sources_given=len(given),
            model_called=bool(given),
            retrieve=retrieved.pipeline,
        )
        if not given:
            pipeline.ungrounded_reason = "nothing_above_threshold"
            return answer_of(request, retrieved.store, CitedText("", [], 0), [], pipeline)
        texts = [source.formatted_content or source.content for source in given]
        generation_request = GenerationRequest(
            system=system_text(request.system_instruction),
            prompt=user_text(request.query, texts),
            question=request.query,
            sources=texts,
            max_output_tokens=request.max_output_tokens,
            model=model,
        )
        started = time.perf_counter()
        if streaming:
            generation = yield from streamed(generator, generation_request)
        else:
            generation = generator.generate(generation_request)
        pipeline.timings_ms.generate = round((time.perf_counter() - started) * 1000, 2)
        pipeline.input_tokens = generation.input_tokens
        pipeline.output_tokens = generation.output_tokens
        pipeline.stop_reason = generation.stop_reason
        cited = cited_text(generation, len(given))
        return answer_of(request, retrieved.store, cited, given, pipeline)


def final_answer(events: Iterator[AnswerEvent]) -> AnswerResponse:
    """The answer the events end with (the pieces of text before it are in it)."""
    for event in events:
        if isinstance(event, AnswerResponse):
            return event
    raise AssertionError("an answer's events ended without the answer")


def streamed(generator: Generator, request: GenerationRequest) -> abc.Generator[str, None, Generation]:
    """Yields the generator's text deltas with their markers removed; returns its Generation."""
    markers = MarkerFilter()
    generation: Generation | None = None
    for event in generator.stream(request):
        if isinstance(event, Generation):
            generation = event
        elif piece := markers.feed(event):
            yield piece
    if rest := markers.flush():
        yield rest
    if generation is None:
        raise AssertionError(f"the {generator.provider} generator's stream ended without its answer")
    return generation


def sources_given(retrieved: RetrieveResponse, max_tokens: int, counter: TokenCounter) -> list[ChunkResult]:
    """The results that fit the token budget, near-duplicates left out, in their order: source 1, 2, ...

    Each keeps its `formattedContent` (citation header and text), which is what the model reads.
    """
    packed = with_context(retrieved, max_tokens, counter)
    return [result for result in packed.results if result.citation is not None]


def cited_text(generation: Generation, source_count: int) -> CitedText:
    """The final text and its checked citations: the provider's own, else the markers in its text."""
    if generation.native_citations is not None:
        return from_native(generation.text, generation.native_citations, source_count)
    return from_markers(generation.text, source_count)


def document_id(source: ChunkResult) -> str:
    """The id of the document a source comes from (its chunk id without `#index` when unrecorded)."""
    recorded = source.metadata.get("documentId")
    return str(recorded) if recorded is not None else source.id.rsplit("#", 1)[0]


def answer_of(
    request: AnswerRequest,
    store: str,
    cited: CitedText,
    given: Sequence[ChunkResult],
    pipeline: AnswerPipeline,
) -> AnswerResponse:
    """The response: text, citations mapped to chunk and document ids, the sources as results."""
    citations = [
        AnswerCitation(
            start=citation.start,
            end=citation.end,
            text=cited.text[citation.start : citation.end],
            sources=list(citation.sources),
            chunk_ids=[given[n - 1].id for n in citation.sources],
            document_ids=list(dict.fromkeys(document_id(given[n - 1]) for n in citation.sources)),
        )
        for citation in cited.citations
    ]
    pipeline.dropped_citations = cited.dropped
    if pipeline.ungrounded_reason is None and not citations:
        reason: UngroundedReason = "no_citations" if cited.text.strip() else "empty_answer"
        pipeline.ungrounded_reason = reason
    sources = [source.model_copy(update={"formatted_content": None, "citation": None}) for source in given]
    return AnswerResponse(
        text=cited.text,
        citations=citations,
        sources=sources,
        grounded=bool(citations),
        query=request.query,
        store=store,
        pipeline=pipeline,
    )
