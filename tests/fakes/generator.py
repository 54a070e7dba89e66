"""A scripted answer generator: it answers what the test says and records every request it was given.

Used where a test is about the answer service (grounding, citations, caching, streaming), not about a
provider: the providers are tested through their real clients against their fakes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from retrieval_core.exceptions import RetrievalError
from retrieval_core.generation.base import Generation, GenerationRequest, NativeCitation, StreamEvent


@dataclass
class ScriptedGenerator:
    """Answers `text` (or `answer(request)`), streamed in `pieces` characters; fails with `failure`."""

    text: str = ""
    answer: Callable[[GenerationRequest], str] | None = None
    native: list[NativeCitation] | None = None
    pieces: int = 5
    failure: RetrievalError | None = None
    # Raise `failure` only after this many stream pieces (0: before any).
    fail_after_pieces: int = 0
    provider: str = "scripted"
    model: str = "scripted-1"
    requests: list[GenerationRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _text(self, request: GenerationRequest) -> str:
        with self._lock:
            self.requests.append(request)
        return self.answer(request) if self.answer is not None else self.text

    def generate(self, request: GenerationRequest) -> Generation:
        text = self._text(request)
        if self.failure is not None:
            raise self.failure
        return Generation(
            text, request.model, self.native, input_tokens=11, output_tokens=7, stop_reason="end"
        )

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        text = self._text(request)
        for number, start in enumerate(range(0, len(text), self.pieces)):
            if self.failure is not None and number == self.fail_after_pieces:
                raise self.failure
            yield text[start : start + self.pieces]
        if self.failure is not None:
            raise self.failure
        yield Generation(
            text, request.model, self.native, input_tokens=11, output_tokens=7, stop_reason="end"
        )
