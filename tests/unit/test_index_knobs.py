from __future__ import annotations

import pytest
from pydantic import ValidationError

from retrieval_core.cache.cache_keys import search_key
from retrieval_core.db.index_knobs import IndexKnobs
from retrieval_core.schemas.retrieve import RetrieveRequest
from retrieval_core.schemas.search_options import SearchKnobs
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest

DEFAULTS = IndexKnobs(100, "relaxed_order", 20_000)


def test_an_override_replaces_only_the_knobs_it_sets() -> None:
    assert DEFAULTS.overridden() == DEFAULTS
    assert DEFAULTS.overridden(ef_search=200) == IndexKnobs(200, "relaxed_order", 20_000)
    assert DEFAULTS.overridden(None, "strict_order", 40_000) == IndexKnobs(100, "strict_order", 40_000)


def test_requests_read_the_override_in_camel_case() -> None:
    body = {"efSearch": 200, "iterativeScan": "strict_order", "maxScanTuples": 40_000}
    retrieve = RetrieveRequest.model_validate({"query": "q", "grade": 0.5, "search": body})
    search = SimilaritySearchRequest.model_validate({"queryEmbedding": [0.1], "search": body})
    expected = SearchKnobs(ef_search=200, iterative_scan="strict_order", max_scan_tuples=40_000)
    assert retrieve.search == search.search == expected


@pytest.mark.parametrize(
    "knobs",
    [
        {"efSearch": 0},
        {"efSearch": 1001},
        {"maxScanTuples": 99},
        {"maxScanTuples": 200_001},
        {"iterativeScan": "sometimes"},
        {"ef_search_typo": 10},
    ],
)
def test_knobs_outside_their_bounds_are_refused(knobs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        SimilaritySearchRequest.model_validate({"queryEmbedding": [0.1], "search": knobs})


def test_effective_knobs_change_the_cache_key() -> None:
    def key(knobs: IndexKnobs) -> str:
        return search_key(
            backend="pgvector",
            store="s",
            store_version=1,
            operation="similarity-search",
            request={"top_k": 10},
            context={"embeddingModel": "m", **knobs.as_dict()},
        )

    assert key(DEFAULTS) != key(DEFAULTS.overridden(ef_search=40))
    assert key(DEFAULTS) != key(DEFAULTS.overridden(iterative_scan="off"))
    assert key(DEFAULTS) != key(DEFAULTS.overridden(max_scan_tuples=1_000))
