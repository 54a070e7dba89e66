"""The extractive generator with the offline all-MiniLM-L6-v2: it quotes the sentence that answers, cites
the source it came from, and embeds once per answer."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from retrieval_core.embeddings import build_embedder
from retrieval_core.generation.base import Generation, GenerationRequest
from retrieval_core.generation.citations import CitedText, from_native
from retrieval_core.generation.extractive import ExtractiveGenerator
from retrieval_core.search.context_packing import citation_header
from retrieval_core.settings import Settings

PAGES = [
    (
        {"title": "PostgreSQL routine vacuuming", "fileName": "pg-guide.pdf", "pageNumber": 4},
        "VACUUM reclaims storage occupied by dead tuples. In normal PostgreSQL operation, tuples that are "
        "deleted or made obsolete by an update are not physically removed from their table; they remain "
        "present until a VACUUM is done. It is therefore necessary to do VACUUM periodically, especially on "
        "frequently updated tables. The autovacuum daemon automates the execution of VACUUM and ANALYZE "
        "commands. When enabled, it checks for tables that have had a large number of inserted, updated or "
        "deleted tuples. VACUUM FULL rewrites the entire contents of the table into a new disk file with no "
        "extra space, which takes much longer and requires an ACCESS EXCLUSIVE lock on each table while it "
        "is being processed.",
    ),
    (
        {"title": "Kubernetes liveness and readiness probes", "fileName": "k8s-docs.pdf", "pageNumber": 44},
        "A liveness probe tells the kubelet when to restart a container. For example, liveness probes could "
        "catch a deadlock, where an application is running but unable to make progress. A readiness probe "
        "tells the kubelet when a container is ready to start accepting traffic. A pod is considered ready "
        "when all of its containers are ready. When a pod is not ready, it is removed from Service load "
        "balancers. A startup probe verifies whether the application within a container has started; if "
        "configured, it disables liveness and readiness checks until it succeeds.",
    ),
    (
        {"title": "HVAC runbook", "fileName": "hvac-runbook.md", "section": "Escalation"},
        "# Escalating temperature complaints\n"
        "If a temperature complaint is not resolved within four hours, escalate to the on-call mechanical "
        "engineer. Include the zone, the readings taken and the actions already tried. Repeated complaints "
        "from the same zone within a week trigger an inspection of the air handling unit.\n"
        "\n"
        "Air filter replacement\n"
        "Air handling unit filters are replaced every three months, or sooner when the pressure drop across "
        "the filter bank exceeds the value on the unit's label. Record the date and the filter grade in the "
        "maintenance log.",
    ),
]
# As the answer service numbers them: each source is its citation header, a line break, the chunk.
SOURCES = [f"{citation_header(metadata)}\n{text}" for metadata, text in PAGES]
HEADERS = [citation_header(metadata) for metadata, _ in PAGES]


class CountingEmbedder:
    """The local model (its model name and dimension too), with every embedding call counted."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed(self, texts: Sequence[str], kind: Any) -> list[list[float]]:
        self.calls += 1
        vectors: list[list[float]] = self._embedder.embed(texts, kind)
        return vectors


@pytest.fixture(scope="module")
def local_embedder() -> Any:
    return build_embedder(Settings(_env_file=None, embedding_provider="local"))


@pytest.fixture()
def embedder(local_embedder: Any) -> Iterator[CountingEmbedder]:
    yield CountingEmbedder(local_embedder)


def _request(question: str, sources: Sequence[str] = SOURCES) -> GenerationRequest:
    return GenerationRequest(
        system="rules",
        prompt="sources",
        question=question,
        sources=sources,
        max_output_tokens=1024,
        model="extractive",
    )


def _cited(generation: Generation) -> list[tuple[str, tuple[int, ...]]]:
    cited: CitedText = from_native(generation.text, generation.native_citations or [], len(SOURCES))
    return [(cited.text[c.start : c.end], c.sources) for c in cited.citations]


@pytest.mark.parametrize(
    ("question", "sentence", "source"),
    [
        (
            "When is a pod taken out of the load balancers?",
            "When a pod is not ready, it is removed from Service load balancers.",
            2,
        ),
        (
            "How often should the air handling unit filters be changed?",
            "Air handling unit filters are replaced every three months, or sooner when the pressure drop "
            "across the filter bank exceeds the value on the unit's label.",
            3,
        ),
        (
            "Who do I escalate to when a temperature complaint stays open for hours?",
            "If a temperature complaint is not resolved within four hours, escalate to the on-call "
            "mechanical engineer.",
            3,
        ),
        (
            "What lock does VACUUM FULL take?",
            "VACUUM FULL rewrites the entire contents of the table into a new disk file with no extra space, "
            "which takes much longer and requires an ACCESS EXCLUSIVE lock on each table while it is being "
            "processed.",
            1,
        ),
    ],
)
def test_the_answer_quotes_the_sentence_that_answers_and_cites_its_source(
    embedder: CountingEmbedder, question: str, sentence: str, source: int
) -> None:
    generation = ExtractiveGenerator(embedder, max_sentences=4).generate(_request(question))
    cited = _cited(generation)
    assert (sentence, (source,)) in cited
    # Every quoted sentence is a sentence of the source it cites.
    assert all(PAGES[numbers[0] - 1][1].count(text) == 1 for text, numbers in cited)
    assert embedder.calls == 1


def test_each_answer_embeds_once_and_keeps_to_the_sentence_bound(embedder: CountingEmbedder) -> None:
    questions = [
        "Why must VACUUM run periodically?",
        "What do Kubernetes probes do?",
        "What is in the runbook?",
    ]
    for max_sentences in (1, 2, 3):
        generator = ExtractiveGenerator(embedder, max_sentences=max_sentences)
        for question in questions:
            before = embedder.calls
            cited = _cited(generator.generate(_request(question)))
            assert embedder.calls == before + 1
            assert 1 <= len(cited) <= max_sentences
    # A broad question about one page gets more than one of its sentences when the bound allows.
    broad = _cited(
        ExtractiveGenerator(embedder, max_sentences=4).generate(_request("What do Kubernetes probes do?"))
    )
    assert len(broad) > 1
    assert {numbers for _, numbers in broad} == {(2,)}


@pytest.mark.parametrize(
    "question",
    [
        "PostgreSQL routine vacuuming pg-guide.pdf page 4",
        "Kubernetes liveness and readiness probes",
        "HVAC runbook escalation",
        "Escalating temperature complaints",
        "Air filter replacement",
    ],
)
def test_headers_headings_and_titles_are_never_quoted(embedder: CountingEmbedder, question: str) -> None:
    # Each question repeats a header, a Markdown heading or a title word for word: the closest text there is.
    generation = ExtractiveGenerator(embedder, max_sentences=4).generate(_request(question))
    cited = _cited(generation)
    assert cited
    for text, _ in cited:
        assert not text.startswith(
            ("Source:", "#", "Escalating temperature complaints", "Air filter replacement")
        )
        assert not any(header in text for header in HEADERS)


def test_stream_deltas_are_the_sentences_and_concatenate_to_the_text(embedder: CountingEmbedder) -> None:
    generator = ExtractiveGenerator(embedder, max_sentences=3)
    *deltas, last = list(generator.stream(_request("What happens when a readiness probe fails?")))
    assert isinstance(last, Generation)
    assert deltas and all(isinstance(d, str) for d in deltas)
    assert "".join(str(d) for d in deltas) == last.text
    assert len(deltas) == len(_cited(last))
    assert embedder.calls == 1


def test_a_question_the_sources_do_not_answer_gets_an_empty_text(embedder: CountingEmbedder) -> None:
    generation = ExtractiveGenerator(embedder).generate(_request("What is the capital of France?"))
    assert generation.text == ""
    assert embedder.calls == 1
