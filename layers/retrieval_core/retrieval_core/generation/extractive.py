"""The offline generator: an answer made of the sources' own sentences, each cited (GENERATION_PROVIDER=
extractive, the default). No model writes anything and nothing leaves the process but the embedder's call.

The sources are split into sentences (sentences.py; citation headers, headings and titles are never
sentences). The question and up to MAX_CANDIDATES sentences are embedded in one call of the service's
embedder, and each sentence is scored by its cosine similarity to the question. The best sentence is
kept if its score reaches MIN_SIMILARITY, and with it up to ANSWER_MAX_SENTENCES - 1 more whose score
is at least RELATIVE_FLOOR times the best one's. The text is those sentences, and each is a native
citation of its exact span naming the source it was copied from, so the answer is grounded by
construction (a source's own bracketed numbers, footnote references, are removed from its sentences:
they would read as citations in a stream).

The one embedding call embeds every text as a `document`: a call has one kind, and of the embedders
only Gemini's tells the kinds apart, so the question and the sentences are compared as texts of one
kind. The embedder's own errors (embedding_provider_error, upstream_timeout) are what a failed answer
raises; the embedder bounds its call's time.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from retrieval_core.generation.base import Generation, GenerationRequest, NativeCitation, StreamEvent
from retrieval_core.generation.sentences import Sentence, candidates, ends_sentence

if TYPE_CHECKING:
    from retrieval_core.embeddings.base import Embedder
    from retrieval_core.settings import Settings

# Sentences embedded per answer, at most: one embedding call of the question and these. Candidates are
# taken in source order, and the sources come best first, so a cut leaves out the least relevant
# sources' sentences. 200 sentences are 8 chunks of 1,000 characters at about 25 sentences each.
MAX_CANDIDATES = 200
# A sentence is chosen only if its similarity is at least this fraction of the best sentence's: the
# answer keeps to sentences about as close to the question as its best one.
RELATIVE_FLOOR = 0.8
# Below this similarity no sentence answers: the answer is empty, and the answer service reports it
# ungrounded rather than quote a sentence about something else. Set for the local all-MiniLM-L6-v2: on
# the paragraphs of tests/integration/test_generation_extractive.py, sentences about another topic score
# at most about 0.1 against a question, and the sentences that answer it 0.5 and more. With an embedder
# whose unrelated texts score higher, the relative floor does the choosing.
MIN_SIMILARITY = 0.2
# The output bound: max_output_tokens * CHARS_PER_TOKEN characters, the usual approximation for English
# text with the BPE tokenizers of the hosted models. Sentences are left out whole, never cut.
CHARS_PER_TOKEN = 4
# The stop reasons of Bedrock Converse: all chosen sentences fit, or the output bound left some out.
STOP_END = "end_turn"
STOP_MAX_TOKENS = "max_tokens"


class ExtractiveGenerator:
    """Answers with the sources' sentences most similar to the question, each cited by its source number.

    The chosen sentences are written in source order, then in their order within the source, not best
    first: sentences of one source then read in the order their author wrote them (a definition before
    the sentence that uses it), and the first source, which retrieval ranked highest, comes first.
    """

    provider = "extractive"
    model = "extractive"

    def __init__(self, embedder: Embedder, max_sentences: int = 4) -> None:
        self._embedder = embedder
        self._max_sentences = max_sentences

    @classmethod
    def from_settings(cls, settings: Settings, embedder: Embedder) -> ExtractiveGenerator:
        """Configure from ANSWER_MAX_SENTENCES; sentences are embedded with `embedder` (the service's)."""
        return cls(embedder, max_sentences=settings.answer_max_sentences)

    def generate(self, request: GenerationRequest) -> Generation:
        """The chosen sentences, each cited exactly (a native citation of its own span), from one
        embedding call; empty if none is usable."""
        pieces, citations, stop_reason = self._pieces(request)
        return Generation("".join(pieces), self.model, citations, stop_reason=stop_reason)

    def stream(self, request: GenerationRequest) -> Iterator[StreamEvent]:
        """Each chosen sentence as one delta, then the Generation.

        There is no provider stream: the sentences are all chosen before the first delta.
        """
        pieces, citations, stop_reason = self._pieces(request)
        yield from pieces
        yield Generation("".join(pieces), self.model, citations, stop_reason=stop_reason)

    def choose(self, question: str, sources: Sequence[str], max_chars: int) -> tuple[list[Sentence], bool]:
        """The sentences that answer `question` in reading order, and whether `max_chars` left any out."""
        pool = candidates(sources, MAX_CANDIDATES) if question.strip() else []
        if not pool:
            return [], False
        vectors = self._embedder.embed([question, *(s.text for s in pool)], "document")
        scores = _cosines(vectors[0], vectors[1:])
        ranked = sorted(range(len(pool)), key=lambda i: -scores[i])
        best = scores[ranked[0]]
        if best < MIN_SIMILARITY:
            return [], False
        chosen: list[Sentence] = []
        length = 0
        cut = False
        for i in ranked:
            if len(chosen) == self._max_sentences or scores[i] < best * RELATIVE_FLOOR:
                break
            added = len(pool[i].text) + len(_marker(pool[i])) + (1 if chosen else 0)
            if length + added > max_chars:
                cut = True
                continue
            chosen.append(pool[i])
            length += added
        chosen.sort(key=lambda s: (s.source, s.position))
        return chosen, cut

    def _pieces(self, request: GenerationRequest) -> tuple[list[str], list[NativeCitation], str]:
        # The spans are exact, where markers would leave the answer service to find where each sentence
        # starts (and an abbreviation such as "Dr." inside one would cut it short).
        chosen, cut = self.choose(
            request.question, request.sources, request.max_output_tokens * CHARS_PER_TOKEN
        )
        pieces: list[str] = []
        citations: list[NativeCitation] = []
        length = 0
        for index, sentence in enumerate(chosen):
            # A list item or a cut piece has no full stop: a line break keeps it from running on.
            separator = "" if index == 0 else " " if ends_sentence(chosen[index - 1].text) else "\n"
            start = length + len(separator)
            citations.append(NativeCitation(start, start + len(sentence.text), (sentence.source,)))
            pieces.append(separator + sentence.text)
            length = start + len(sentence.text)
        return pieces, citations, STOP_MAX_TOKENS if cut else STOP_END


def _marker(sentence: Sentence) -> str:
    # Counted in the output bound as a model's citation would be.
    return f" [{sentence.source}]"


def _cosines(question: list[float], sentences: list[list[float]]) -> list[float]:
    # Pure Python (numpy is not in the core layer): 200 sentences of 384 dimensions take milliseconds,
    # next to the hundreds their embedding takes.
    question_norm = math.sqrt(_dot(question, question))
    scores = []
    for vector in sentences:
        norms = question_norm * math.sqrt(_dot(vector, vector))
        scores.append(_dot(question, vector) / norms if norms else 0.0)
    return scores


def _dot(a: list[float], b: list[float]) -> float:
    return float(sum(map(operator.mul, a, b)))
