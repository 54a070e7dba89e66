from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from retrieval_core.filters.predicate import TRUE
from retrieval_core.filters.sql import document_ids_in, metadata_equals

INJECTIONS = ["'; DROP TABLE chunks; --", '" OR 1=1 --', "x') OR ('1'='1", "%(limit)s", "$1"]


def test_no_filter_is_the_empty_predicate() -> None:
    assert metadata_equals(None) is TRUE
    assert document_ids_in([]) is TRUE
    assert (TRUE & TRUE).sql == ""


def test_metadata_equalities_are_one_bound_jsonb_containment() -> None:
    predicate = metadata_equals({"project_name": "ABC Project", "year": 2023, "draft": False})
    assert predicate.sql == "metadata @> %(metadata_contains)s::jsonb"
    assert json.loads(predicate.params["metadata_contains"]) == {
        "project_name": "ABC Project",
        "year": 2023,
        "draft": False,
    }


def test_predicates_combine_with_and() -> None:
    combined = document_ids_in(["a"]) & metadata_equals({"k": "v"})
    assert combined.sql.count("AND") == 1
    assert set(combined.params) == {"document_ids", "metadata_contains"}


@given(
    st.dictionaries(
        st.sampled_from(INJECTIONS) | st.text(min_size=1), st.sampled_from(INJECTIONS) | st.text(), min_size=1
    )
)
def test_sql_text_is_fixed_whatever_the_user_sends(filters: dict[str, str]) -> None:
    predicate = document_ids_in(list(filters)) & metadata_equals(filters)
    assert (
        predicate.sql
        == "(document_id = ANY(%(document_ids)s::text[])) AND (metadata @> %(metadata_contains)s::jsonb)"
    )
    assert json.loads(predicate.params["metadata_contains"]) == filters
    assert predicate.params["document_ids"] == list(filters)
