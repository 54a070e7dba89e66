"""The pure parts of paged store lists: a prefix as a range of names, the cursor and its refusals."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_core.db.stores import prefix_end
from retrieval_core.documents.cursors import decode_cursor, encode_cursor, store_cursor
from retrieval_core.documents.exceptions import InvalidCursorError

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=6)
# Few distinct characters, the last code point among them: prefixes and their neighbours meet often.
NEAR = st.text(st.sampled_from(["a", "b", "_", "%", "\\", "\ud7ff", "\ue000", "\U0010ffff"]), max_size=5)


@given(st.one_of(TEXT, NEAR), st.one_of(TEXT, NEAR))
def test_a_name_starts_with_the_prefix_exactly_when_it_lies_in_its_range(prefix: str, name: str) -> None:
    end = prefix_end(prefix)
    in_range = prefix <= name and (end is None or name < end)
    assert in_range == name.startswith(prefix)


@given(st.one_of(TEXT, NEAR))
def test_the_range_compares_as_postgresql_compares_text_under_collate_c(text: str) -> None:
    # COLLATE "C" compares the UTF-8 bytes; Python compares code points: the same order.
    end = prefix_end(text)
    if end is not None:
        assert text.encode() < end.encode()


def test_prefix_end_examples() -> None:
    assert prefix_end("") is None
    assert prefix_end("team_") == "team`"
    assert prefix_end("a%") == "a&"
    assert prefix_end("a\U0010ffff") == "b"
    assert prefix_end("\U0010ffff") is None
    assert prefix_end("\ud7ff") == "\ue000"


@pytest.mark.parametrize(
    ("cursor", "cause"),
    [
        ("%%%", "not_base64"),
        ("c3RvcmU*", "not_base64"),
        (base64.urlsafe_b64encode(b"\xff\xfe").decode(), "not_text"),
        (encode_cursor("a\x00b"), "not_a_key"),
    ],
)
def test_a_cursor_that_is_not_ours_names_its_cause(cursor: str, cause: str) -> None:
    with pytest.raises(InvalidCursorError) as refused:
        decode_cursor(cursor)
    assert refused.value.status_code == 422 and refused.value.code == "invalid_cursor"
    (error,) = refused.value.details["errors"]
    assert (error["field"], error["type"]) == ("cursor", cause)
    assert refused.value.message.startswith("cursor: ")


def test_a_store_cursor_holds_a_store_name() -> None:
    assert store_cursor(encode_cursor("team_a.v2")) == "team_a.v2"
    for key in ("policies/travel.pdf", "", "-dash"):
        with pytest.raises(InvalidCursorError) as refused:
            store_cursor(encode_cursor(key))
        assert refused.value.details["errors"][0]["type"] == "not_a_store_name"
