"""The evaluation's run loop (evaluation/scorecard.py): it scores queries in order and stops early, saying
why, when the request's deadline or one Lambda response has no room for the next query."""

from __future__ import annotations

import time

from retrieval_core.clients.retry import Deadline
from retrieval_core.evaluation.runner import Method, Query
from retrieval_core.evaluation.scorecard import ANSWER_RESERVE_S, EMBED_BATCH, run

QUERIES = [(f"q{i}", f"question {i}") for i in range(EMBED_BATCH + 3)]
QRELS = {q: {"d1": 1, "d9": 0} for q, _ in QUERIES}


def embedder(calls: list[int]):  # type: ignore[no-untyped-def]
    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(len(texts))
        return [[1.0, 0.0] for _ in texts]

    return embed


def ranking(*documents: str, sleep_s: float = 0.0, name: str = "") -> Method:
    def rank(query: Query) -> list[str]:
        time.sleep(sleep_s)
        return list(documents)

    return Method(name or f"ranks {' '.join(documents)}", "", rank)


def test_every_query_is_scored_with_every_method_and_embedded_once() -> None:
    calls: list[int] = []
    first, last = ranking("d1", "d2"), ranking("d9", "d2", "d1")
    tally = run([first, last], QUERIES, QRELS, 2, embedder(calls), Deadline(None))
    assert tally.stopped_by is None and len(tally.queries) == len(QUERIES)
    assert calls == [EMBED_BATCH, 3]
    scores = tally.queries[0].scores
    assert (scores[first.name].ndcg, scores[first.name].recall) == (1.0, 1.0)
    assert (scores[last.name].ndcg, scores[last.name].recall) == (0.0, 0.0)
    assert scores[last.name].top_documents == ["d9", "d2"]
    assert all(len(ms) == len(QUERIES) for ms in tally.latency_ms.values())


def test_the_run_stops_before_a_query_the_deadline_has_no_time_for() -> None:
    slow = ranking("d1", sleep_s=0.3)
    # 1 s: the first query (0.3 s) leaves 0.7 s, less than the slowest query plus the answer's reserve.
    assert 0.3 + ANSWER_RESERVE_S > 1.0 - 0.3
    tally = run([slow], QUERIES, QRELS, 10, embedder([]), Deadline(1.0))
    assert tally.stopped_by == "deadline"
    assert [q.id for q in tally.queries] == ["q0"]
    assert tally.latency_ms[slow.name] and len(tally.latency_ms[slow.name]) == 1


def test_a_passed_deadline_scores_nothing_and_embeds_nothing() -> None:
    calls: list[int] = []
    tally = run([ranking("d1")], QUERIES, QRELS, 10, embedder(calls), Deadline(0.0))
    assert (tally.stopped_by, tally.queries, calls) == ("deadline", [], [])


def test_the_run_stops_before_a_query_whose_scores_would_not_fit_in_the_response() -> None:
    long_ids = [f"{i:04d}" + "x" * 1000 for i in range(10)]
    method = ranking(*long_ids, name="long ids")
    tally = run([method], QUERIES, QRELS, 10, embedder([]), Deadline(None), room_bytes=25_000)
    assert tally.stopped_by == "responseSize"
    # Each query's ten 1,004-character ids take a little over 10,000 bytes: two fit in 25,000.
    assert len(tally.queries) == 2 and len(tally.latency_ms["long ids"]) == 2
