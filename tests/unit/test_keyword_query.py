"""The keyword side's query is bounded before it reaches PostgreSQL."""

from __future__ import annotations

from bench.query_cost import negated_terms
from retrieval_core.search.keyword_query import (
    MAX_KEYWORD_TERMS,
    NO_KEYWORD_TERM,
    is_keyword_note,
    normalise_keyword_query,
)


def test_an_ordinary_question_is_sent_as_it_is() -> None:
    query = normalise_keyword_query('How does "front desk" work? -badge or visitor')
    assert query.text == 'How does "front desk" work? -badge or visitor'
    assert query.terms == 6 and query.warning is None
    assert query.positive_text == 'How does "front desk" work? visitor'


def test_a_query_of_only_negations_is_not_sent() -> None:
    attack = negated_terms(1600)
    assert len(attack) == 7323
    query = normalise_keyword_query(attack)
    assert query.text is None and query.terms == 0
    assert query.warning == NO_KEYWORD_TERM


def test_punctuation_and_operators_alone_are_no_term() -> None:
    for text in ["?!", "- -- ...", "or OR or", '-"front desk" -(x)']:
        assert normalise_keyword_query(text).text is None, text


def test_terms_past_the_cap_are_left_out_and_said_so() -> None:
    words = [f"w{i}" for i in range(100)]
    query = normalise_keyword_query(" ".join(words))
    assert query.text == " ".join(words[:MAX_KEYWORD_TERMS])
    assert query.terms == MAX_KEYWORD_TERMS
    assert (
        query.warning
        == f"the keyword search used the first {MAX_KEYWORD_TERMS} terms of the query (36 more were left out)"
    )


def test_negations_count_towards_the_cap_and_a_trailing_or_is_dropped() -> None:
    query = normalise_keyword_query("alpha or -b -c -d or e", max_terms=4)
    assert query.text == "alpha or -b -c -d"
    assert query.terms == 4


def test_the_dev_sets_longest_question_keeps_every_word() -> None:
    # scifact's longest query has 29 words; MAX_KEYWORD_TERMS leaves real questions whole.
    question = " ".join(f"word{i}" for i in range(29))
    assert normalise_keyword_query(question).text == question


def test_only_the_notes_of_this_module_count_as_notes() -> None:
    cut = normalise_keyword_query(" ".join(f"w{i}" for i in range(70))).warning
    assert cut is not None and is_keyword_note(cut)
    assert is_keyword_note(NO_KEYWORD_TERM)
    assert not is_keyword_note("reranker 'bge' failed (timeout); results keep search order")
