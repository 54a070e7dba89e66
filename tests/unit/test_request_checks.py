"""The pure pieces of hardening (key matching, vector scaling, request validation)."""

from __future__ import annotations

import hashlib
import math

import pytest
from pydantic import ValidationError

from retrieval_core.api.api_keys import READ_ONLY_KEY, ApiKey, hash_api_key, match_key, parse_key_hashes
from retrieval_core.exceptions import ConfigurationError
from retrieval_core.schemas.retrieve import RetrieveRequest
from retrieval_core.schemas.similarity_search import SimilaritySearchRequest
from retrieval_core.search.ranking import unit_vector


def test_auth_hash_api_key_is_the_sha256_hex_digest() -> None:
    assert hash_api_key("k3y") == hashlib.sha256(b"k3y").hexdigest()


def read_only(text: str) -> list[ApiKey]:
    return [ApiKey(d, READ_ONLY_KEY) for d in parse_key_hashes(text, "TEST")]


def test_auth_key_matches_any_listed_digest_and_nothing_else() -> None:
    keys = read_only(f"{hash_api_key('one')}, {hash_api_key('two').upper()}\n")
    assert match_key("one", keys) is READ_ONLY_KEY and match_key("two", keys) is READ_ONLY_KEY
    assert match_key("three", keys) is None
    assert match_key(None, keys) is None and match_key("", keys) is None
    # An empty key never matches, even if someone configured the digest of the empty string.
    assert match_key("", read_only(hash_api_key(""))) is None
    assert parse_key_hashes(" , \n", "TEST") == []


def test_auth_a_non_digest_is_refused_without_being_quoted() -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_key_hashes("rk_live_supersecret", "API_KEY_HASHES")
    assert "rk_live_supersecret" not in raised.value.message
    assert "API_KEY_HASHES" in raised.value.message


@pytest.mark.parametrize("scale", [1e-300, 1e-30, 1.0, 1e30, 1e300])
def test_limits_unit_vector_keeps_the_direction_at_any_scale(scale: float) -> None:
    vector = [3.0 * scale, -4.0 * scale, 0.0]
    assert unit_vector(vector) == pytest.approx([0.6, -0.8, 0.0])


def test_limits_unit_vector_of_a_vector_longer_than_the_largest_double() -> None:
    assert unit_vector([1e308, -1e308, 1e308, 1e308]) == pytest.approx([0.5, -0.5, 0.5, 0.5])


def test_limits_unit_vector_leaves_a_unit_vector_as_it_is() -> None:
    vector = [0.6, -0.8, 0.0]
    assert unit_vector(vector) is vector
    assert unit_vector((0.6, -0.8)) == [0.6, -0.8]
    assert unit_vector([0.6 * 1.01, -0.8 * 1.01]) == pytest.approx([0.6, -0.8])


def test_limits_unit_vector_refuses_the_zero_vector() -> None:
    with pytest.raises(ValueError, match="zero vector"):
        unit_vector([0.0, -0.0])


@pytest.mark.parametrize(
    "body",
    [
        {"queryEmbedding": [0.0, 0.0]},
        {"queryEmbedding": [1.0, math.nan]},
        {"queryEmbedding": [1.0], "metadataFilter": {"k": math.inf}},
        {"queryEmbedding": [1.0], "metadataFilter": {"k": "a\x00"}},
        {"queryEmbedding": [1.0], "docIds": ["\udfff"]},
        {"queryEmbedding": [1.0], "topK": 101},
    ],
)
def test_limits_similarity_search_requests_refused(body: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValidationError):
        SimilaritySearchRequest.model_validate(body)


def test_limits_unicode_text_is_accepted() -> None:
    request = RetrieveRequest.model_validate(
        {"query": "日本語 🚀 e\u0301", "grade": 0.1, "metadataFilter": {"ключ": "значение ✓"}}
    )
    assert request.metadata_filter == {"ключ": "значение ✓"}
