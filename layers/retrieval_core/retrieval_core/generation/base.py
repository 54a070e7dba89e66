"""What every generator shares: the request it is given, what it answers, and the protocol. Pure.

A generator writes an answer from numbered sources. It cites a source by writing its number in square
brackets after the words it supports (`[2]`, or `[1][3]`); a provider whose API has native citations
(Bedrock Converse with document blocks) may return them instead, as `NativeCitation`s over its raw
text. Either way the answer service (search/answer.py) checks every citation against the sources the
generator was given, removes the markers and reports spans of the final text.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from retrieval_core.exceptions import (
    GenerationProviderError,
    RetrievalError,
    UpstreamTimeoutError,
    UpstreamUnavailableError,
)

# Seconds a client is told to wait when a throttled provider did not say (Retry-After).
DEFAULT_RETRY_AFTER_S = 5


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """One answer to write. `sources[i]` is source number i + 1 in `prompt`."""

    system: str  # the grounding rules, with the request's systemInstruction after them
    prompt: str  # the user turn: the numbered sources, then the question
    question: str
    sources: Sequence[str]
    max_output_tokens: int
    model: str  # already checked against the allow-list


@dataclass(frozen=True, slots=True)
class NativeCitation:
    """A citation the provider returned itself: code points [start, end) of `Generation.text`."""

    start: int
    end: int
    sources: tuple[int, ...]  # source numbers, 1-based


@dataclass(slots=True)
class Generation:
    """A generator's answer: raw text (with `[n]` markers unless `native_citations`), and its usage."""

    text: str
    model: str
    native_citations: list[NativeCitation] | None = None
    input_tokens: int | None = None  # None: the provider does not count (the extractive generator)
    output_tokens: int | None = None
    stop_reason: str | None = None
    details: dict[str, object] = field(default_factory=dict)


# What `Generator.stream` yields: text deltas (str) as they arrive, then the whole Generation, once, last.
StreamEvent = str | Generation


class Generator(Protocol):
    """Writes answers from numbered sources. Implementations build their client on first use.

    Failures raise RetrievalErrors that name their cause: 504 `upstream_timeout` when the call could not
    finish within the request's deadline (clients/deadline.py) or the generation timeout, 503
    `upstream_unavailable` when throttled through every attempt, `upstream_auth_rejected` when the
    credentials were refused, 502 `generation_provider_error` for any other unusable answer.
    """

    provider: str
    model: str  # the default model

    def generate(self, request: GenerationRequest) -> Generation:
        """The whole answer, from one provider call (with retries inside the time budget)."""
        ...

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        """Text deltas from the provider's streaming API as they arrive, then the whole Generation.

        The concatenated deltas equal the Generation's text.
        """
        ...


def give_up(message: str, details: dict[str, Any], *, out_of_time: bool) -> RetrievalError:
    """The error of a generation call no attempt of which succeeded (clients/attempts.py `GiveUp`).

    Out of time: 504 `upstream_timeout`. Throttled or unavailable (429, 503) to the last attempt: 503
    `upstream_unavailable`, with `retry_after_s` from details when the provider said. Else 502
    `generation_provider_error`.
    """
    if out_of_time:
        return UpstreamTimeoutError(message, details)
    if details.get("status") in (429, 503):
        retry_after = details.get("retry_after_s")
        seconds = int(retry_after) if isinstance(retry_after, int | float) and retry_after > 0 else None
        return UpstreamUnavailableError(message, details, retry_after_s=seconds or DEFAULT_RETRY_AFTER_S)
    return GenerationProviderError(message, details)
