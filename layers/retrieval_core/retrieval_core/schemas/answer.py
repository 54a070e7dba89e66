"""POST /api/v1/rag/answer: a retrieve request with generation options, and the grounded answer."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from retrieval_core.schemas.common import ResponseModel, Text, absent_when_none, not_applicable
from retrieval_core.schemas.results import ChunkResult
from retrieval_core.schemas.retrieve import Pipeline, RetrieveRequest

# The sources' token budget when a request sets no maxContextTokens: ample for the default five results.
DEFAULT_ANSWER_CONTEXT_TOKENS = 4_000
# Fields of an answer request that the retrieve under it does not take.
GENERATION_FIELDS = frozenset({"system_instruction", "max_output_tokens", "model", "max_context_tokens"})

UngroundedReason = Literal["nothing_above_threshold", "no_citations", "no_grounding_supports", "empty_answer"]


class AnswerRequest(RetrieveRequest):
    """POST /api/v1/rag/answer: what POST /rag/retrieve takes, and how the answer is written.

    The retrieve options pick the sources exactly as they pick retrieve's results; `maxContextTokens`
    bounds the sources given to the model (default 4,000 tokens) and needs no returnFormatted, which
    an answer does not take.
    """

    system_instruction: Text | None = Field(
        default=None,
        min_length=1,
        max_length=8000,
        description="Added after the grounding rules (answer only from the sources, cite them), never in "
        "their place: the tone, the language or the length of answers.",
    )
    max_output_tokens: int = Field(default=512, ge=1, le=8192, description="Longest answer, in tokens.")
    model: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$",
        description="The generation model; GENERATION_MODEL when unset. Only models the service allows "
        "(GENERATION_MODELS_ALLOWED) are accepted. For a Gemini File Search store: the Gemini model.",
    )

    @model_validator(mode="after")
    def _no_formatting(self) -> AnswerRequest:
        if "return_formatted" in self.model_fields_set:
            error = not_applicable(
                ("returnFormatted",),
                "an answer gives its sources, not a context string; use /rag/retrieve for that",
                self.return_formatted,
            )
            raise ValidationError.from_exception_data(type(self).__name__, [error])
        return self

    @property
    def context_needs_formatting(self) -> bool:
        """maxContextTokens bounds the sources of an answer, with no returnFormatted."""
        return False

    @property
    def context_tokens(self) -> int:
        """The sources' token budget: maxContextTokens, or the default."""
        return self.max_context_tokens or DEFAULT_ANSWER_CONTEXT_TOKENS

    def retrieve_request(self) -> RetrieveRequest:
        """The retrieve under this answer: the same options, as sent, without the generation ones."""
        body = self.model_dump(by_alias=True, exclude_unset=True, exclude=set(GENERATION_FIELDS))
        return RetrieveRequest.model_validate(body)


class AnswerCitation(ResponseModel):
    """A span of `text` and the sources it stands on."""

    start: int = Field(description="First code point of the span in `text` (Unicode code points, from 0).")
    end: int = Field(description="Code point after the span: text[start:end] in Python.")
    text: str = Field(description="The span itself.")
    sources: list[int] = Field(description="Numbers of the sources cited, 1-based positions in `sources`.")
    chunk_ids: list[str]
    document_ids: list[str]


class AnswerTimings(ResponseModel):
    """Milliseconds of each stage of the answer."""

    retrieve: float = 0.0
    generate: float = 0.0
    total: float = 0.0


class AnswerPipeline(ResponseModel):
    """What the service did to answer: the retrieve, the generator, and why an answer is not grounded."""

    backend: Literal["pgvector", "gemini"]
    provider: str = Field(description="Who wrote the answer: extractive, bedrock, openai or gemini.")
    model: str
    prompt_version: str
    sources_given: int = Field(description="Sources in the prompt (0: no model was called).")
    model_called: bool
    ungrounded_reason: UngroundedReason | None = Field(
        default=None,
        description="Why `grounded` is false: nothing_above_threshold (no chunk passed grade or "
        "minFusedScore; no model was called), no_citations (the answer cites no source), "
        "no_grounding_supports (Gemini returned none), empty_answer (the generator found nothing to say).",
    )
    dropped_citations: int = Field(
        default=0, description="Citations the model made to sources it was not given, removed."
    )
    input_tokens: int | None = Field(default=None, description="Null when the provider does not count.")
    output_tokens: int | None = None
    stop_reason: str | None = None
    timings_ms: AnswerTimings = Field(default_factory=AnswerTimings)
    retrieve: Pipeline | None = Field(
        default=None, description="The retrieve's own report (pgvector and attached stores)."
    )
    warnings: list[str] = Field(default_factory=list)


class AnswerResponse(ResponseModel):
    """The answer, the spans its sources support, and the sources given to the model.

    `grounded` is false when nothing passed the threshold (then `text` is empty and no model was
    called) or when the answer cites no source; `pipeline.ungroundedReason` says which.
    """

    text: str
    citations: list[AnswerCitation]
    sources: list[ChunkResult] = Field(description="The chunks given to the model, numbered from 1.")
    grounded: bool
    query: str
    store: str
    pipeline: AnswerPipeline
    grounding_metadata: dict[str, Any] | None = Field(
        default=None,
        exclude_if=absent_when_none,
        description="Gemini File Search stores only: Gemini's raw groundingMetadata.",
    )
