"""Source extraction from groundingMetadata, grading, filters and store matching: pure functions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from retrieval_core.backends.gemini.resolve import StoreEntry, match_store
from retrieval_core.backends.gemini.service import (
    gemini_filter,
    graded,
    parse_generate_response,
)
from retrieval_core.backends.gemini.sources import chunk_results, chunk_scores, extract_sources
from retrieval_core.exceptions import InvalidRequestError
from tests.integration.knowledge_support import (
    FILE_SEARCH_GROUNDING,
    HVAC_ESCALATION,
    HVAC_MANUAL,
    HVAC_STORE,
    LEGACY_GROUNDING,
    WEB_GROUNDING,
)


def test_retrieved_context_gives_every_field_and_keeps_duplicate_chunks_of_one_document() -> None:
    sources = extract_sources(FILE_SEARCH_GROUNDING)
    assert [s.document_id for s in sources] == [HVAC_MANUAL, HVAC_MANUAL, HVAC_ESCALATION]
    first = sources[0]
    assert first.document_name == "hvac-manual.pdf"
    assert first.chunk == "Cold complaints: check the thermostat set point first."
    assert first.store_name == HVAC_STORE
    assert first.page_number == 12
    assert first.metadata == {"source_type": "s3", "year": 2024, "tags": ["hvac", "cold"]}
    assert (
        sources[1].chunk == "If the unit short-cycles, inspect the filter." and sources[1].page_number == 13
    )
    # No fileSearchStore field: the store comes from the document's resource name.
    assert sources[2].store_name == HVAC_STORE


def test_score_is_the_highest_confidence_of_the_supports_citing_the_chunk_and_never_invented() -> None:
    scores = [s.score for s in extract_sources(FILE_SEARCH_GROUNDING)]
    # Chunk 0 is cited with 0.62 and 0.88, chunk 1 with 0.91, chunk 2 by no support.
    assert scores == [0.88, 0.91, None]


def test_supports_pair_each_confidence_with_its_own_chunk_index() -> None:
    supports = [
        {"groundingChunkIndices": [2, 0], "confidenceScores": [0.3, 0.8]},
        {"groundingChunkIndices": [5], "confidenceScores": [0.99]},  # out of range: ignored
        {"groundingChunkIndices": [1]},  # no confidences: no score
    ]
    assert chunk_scores(supports, 3) == {2: 0.3, 0: 0.8}


def test_web_chunks_give_uri_title_and_domain() -> None:
    web = extract_sources(WEB_GROUNDING)
    assert [(s.uri, s.document_name, s.score) for s in web] == [
        ("https://example.org/hvac", "example.org", None),
        ("https://example.net/cold", "Cold rooms", 0.7),
    ]
    assert web[0].metadata == {"domain": "example.org"} and web[1].metadata == {}
    assert all(s.chunk is None and s.store_name is None for s in web)


def test_legacy_chunk_and_chunk_data_structures() -> None:
    legacy, bare = extract_sources(LEGACY_GROUNDING)
    assert legacy.chunk == "Legacy: check the thermostat."
    assert legacy.document_id == "corpora/hvac/documents/manual"
    assert legacy.store_name == "corpora/hvac"
    assert legacy.metadata == {"source_type": "gcs"}
    assert bare.chunk == "Legacy: bare chunk data." and bare.document_id is None
    assert legacy.score is None and bare.score is None


def test_rag_chunk_fills_text_and_page_when_the_context_lacks_them() -> None:
    grounding = {
        "groundingChunks": [
            {
                "retrievedContext": {
                    "uri": "gs://bucket/manual.pdf",
                    "ragChunk": {"text": "From the RAG chunk.", "pageSpan": {"firstPage": 4, "lastPage": 5}},
                }
            }
        ]
    }
    (source,) = extract_sources(grounding)
    assert (source.chunk, source.page_number, source.uri) == (
        "From the RAG chunk.",
        4,
        "gs://bucket/manual.pdf",
    )


@pytest.mark.parametrize("grounding", [None, {}, {"groundingChunks": []}, {"retrievalQueries": ["q"]}])
def test_empty_grounding_gives_no_sources(grounding: dict[str, Any] | None) -> None:
    assert extract_sources(grounding) == []


def test_unknown_chunk_shapes_are_skipped_and_scores_still_follow_their_index() -> None:
    grounding = copy.deepcopy(FILE_SEARCH_GROUNDING)
    grounding["groundingChunks"].insert(0, {"image": {"uri": "https://example.org/a.png"}})
    grounding["groundingSupports"] = [{"groundingChunkIndices": [2], "confidenceScores": [0.5]}]
    sources = extract_sources(grounding)
    assert len(sources) == 3
    assert [s.score for s in sources] == [None, 0.5, None]


def test_grade_keeps_scored_chunks_at_or_above_it_and_unscored_only_at_zero() -> None:
    sources = extract_sources(FILE_SEARCH_GROUNDING)
    assert [s.score for s in graded(sources, 0.0)] == [0.91, 0.88, None]
    assert [s.score for s in graded(sources, 0.88)] == [0.91, 0.88]
    assert graded(sources, 0.95) == []


def test_chunk_results_number_each_documents_chunks_and_carry_the_metadata() -> None:
    results = chunk_results(graded(extract_sources(FILE_SEARCH_GROUNDING), 0.0))
    assert [r.id for r in results] == [f"{HVAC_MANUAL}#0", f"{HVAC_MANUAL}#1", f"{HVAC_ESCALATION}#0"]
    first = results[0]
    assert first.content == "If the unit short-cycles, inspect the filter." and first.score == 0.91
    assert first.metadata["documentName"] == "hvac-manual.pdf" and first.metadata["pageNumber"] == 13
    assert results[1].metadata["source_type"] == "s3" and results[2].score is None


def test_metadata_equalities_become_a_gemini_filter() -> None:
    assert gemini_filter(None) is None
    assert gemini_filter({"source_type": "s3", "year": 2024}) == 'source_type = "s3" AND year = 2024'
    assert gemini_filter({"title": 'say "hi"'}) == 'title = "say \\"hi\\""'
    with pytest.raises(InvalidRequestError, match="booleans"):
        gemini_filter({"draft": True})
    with pytest.raises(InvalidRequestError, match="identifiers"):
        gemini_filter({"bad key": "x"})


def test_generate_response_text_skips_thoughts_and_tolerates_no_candidates() -> None:
    body = (
        '{"candidates": [{"content": {"parts": [{"text": "thinking", "thought": true}, {"text": "A"},'
        ' {"text": "B"}]}, "groundingMetadata": {"groundingChunks": []}}]}'
    )
    assert parse_generate_response(body) == ("AB", {"groundingChunks": []})
    assert parse_generate_response('{"promptFeedback": {"blockReason": "SAFETY"}}') == ("", None)


STORES = [
    StoreEntry("fileSearchStores/a1", "Alpha"),
    StoreEntry("fileSearchStores/b2", "fileSearchStores/a1"),  # a display name that is another's name
    StoreEntry("fileSearchStores/hvac", None),
]


@pytest.mark.parametrize(
    ("name", "expected", "resolved_by"),
    [
        ("Alpha", "fileSearchStores/a1", "displayName"),
        # Names are matched before display names, as on every path.
        ("fileSearchStores/a1", "fileSearchStores/a1", "name"),
        ("fileSearchStores/hvac", "fileSearchStores/hvac", "name"),
        ("hvac", "fileSearchStores/hvac", "pattern"),
        ("nowhere", "fileSearchStores/nowhere", "fallback"),
        # A full name nothing lists is not prefixed twice.
        ("fileSearchStores/gone", "fileSearchStores/gone", "fallback"),
    ],
)
def test_match_store_takes_names_before_display_names(name: str, expected: str, resolved_by: str) -> None:
    resolved = match_store(name, STORES, "gemini")
    assert resolved is not None
    assert (resolved.name, resolved.resolved_by) == (expected, resolved_by)


def test_pgvector_matching_has_no_pattern_or_fallback() -> None:
    stores = [StoreEntry("sample", "Sample corpus")]
    assert match_store("Sample corpus", stores, "pgvector").name == "sample"  # type: ignore[union-attr]
    assert match_store("fileSearchStores/sample", stores, "pgvector") is None
    assert match_store("other", stores, "pgvector") is None
