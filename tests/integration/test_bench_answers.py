"""bench/answers.py on a tiny set: the sample it asks, what it counts of the extractive answers, its table,
and the overhead run through the HTTP app with its instant generator."""

from __future__ import annotations

import uuid
from typing import Any

from bench.answers import InstantGenerator, answer_set, overhead, sample_questions, table
from retrieval_core.container import get_generator
from tests.writing import TextDocument, ensure_store, write_documents

DOCUMENTS = [
    TextDocument(
        "k8s",
        "The Kubernetes scheduler assigns each new pod to a node. It filters out the nodes that lack "
        "the CPU and memory the pod requests, then scores the rest and binds the pod to the best node.",
        "Pod scheduling",
    ),
    TextDocument(
        "bread",
        "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the dough. Bakers "
        "feed the starter with flour and water every day to keep the culture active.",
        "Sourdough",
    ),
    TextDocument(
        "volcano",
        "A volcano erupts when magma rises through cracks in the crust and gas pressure builds up. "
        "Explosive eruptions throw ash and rock high into the atmosphere.",
        "Volcanoes",
    ),
]
QUERIES = {
    "2": "How does the Kubernetes scheduler choose a node for a pod?",
    "10": "Why does sourdough bread rise?",
    "3": "What makes a volcano erupt?",
    "4": "How do bakers keep a sourdough starter alive?",
}
# Query 3 is judged against the bread document, so its answer (quoting the volcano one) cites nothing
# relevant; query 4 has no relevant judgment and is not asked.
QRELS = {"2": {"k8s": 1}, "10": {"bread": 2, "k8s": 0}, "3": {"bread": 1}, "4": {"bread": 0}}


def tiny_store(service: Any) -> str:
    name = f"eval-tiny-{uuid.uuid4().hex[:8]}"
    ensure_store(service, name)
    write_documents(service, name, DOCUMENTS, 1000, 150)
    return name


def test_the_sample_is_the_judged_queries_in_id_order() -> None:
    assert sample_questions(QUERIES, QRELS, 10) == [
        ("2", QUERIES["2"]),
        ("3", QUERIES["3"]),
        ("10", QUERIES["10"]),
    ]
    assert [q for q, _ in sample_questions(QUERIES, QRELS, 2)] == ["2", "3"]


def test_extractive_answers_are_counted_by_what_they_cite(service: Any) -> None:
    store = tiny_store(service)
    questions = sample_questions(QUERIES, QRELS, 10)

    figures = answer_set("tiny", store, questions, QRELS, grade=0.2)
    row = figures.row()
    assert (figures.questions, figures.citing, figures.citing_relevant, figures.nothing_above) == (3, 3, 2, 0)
    assert row["relevant_of_citing"] == row["relevant_of_all"] == 200 / 3
    assert row["grounded"] == 100.0
    assert figures.sources_relevant >= figures.citing_relevant
    assert figures.citations >= 3 and figures.dropped == 0
    assert len(figures.answer_ms) == len(figures.generate_ms) == 3
    assert row["answer_ms"] >= row["generate_ms"] > 0

    nothing = answer_set("tiny", store, questions, QRELS, grade=0.99)
    assert (nothing.questions, nothing.nothing_above, nothing.citing, nothing.generate_ms) == (3, 3, 0, [])
    rendered = table([figures, nothing]).splitlines()
    assert rendered[2].startswith("| tiny | 3 | 66.7% | 66.7% |")
    assert rendered[3].startswith("| tiny | 3 | — | 0.0% |")
    assert rendered[4].startswith("| **mean** | 3.0 | 66.7% | 33.3% |")


def test_the_overhead_run_leaves_out_the_warm_up_and_restores_the_generator(service: Any) -> None:
    store = tiny_store(service)
    before = get_generator()

    measured = overhead(store, list(QUERIES.values()), grade=0.2, warmup=1)

    assert len(measured.http) == len(measured.service) == 3
    assert all(0 <= inside < wall for inside, wall in zip(measured.service, measured.http, strict=True))
    assert get_generator() is before and not isinstance(before, InstantGenerator)
