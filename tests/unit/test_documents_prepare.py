"""The pure part of the write side: sequencers, ids, metadata checks, fingerprints, hashes, cursors."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval_core.documents.cursors import decode_cursor, encode_cursor
from retrieval_core.documents.models import SourceInput
from retrieval_core.documents.prepare import (
    MAX_METADATA_DEPTH,
    check_document_id,
    check_metadata,
    check_store_name,
    fingerprint,
    newer_sequencer,
    prepare_source,
)
from retrieval_core.exceptions import InvalidRequestError
from retrieval_core.parsers.exceptions import EmptyDocumentError
from tests.files import jsonl_bytes


@pytest.mark.parametrize(
    ("candidate", "applied", "newer"),
    [
        ("0A", None, True),
        ("0B", "0A", True),
        ("0A", "0A", False),
        ("0a", "0A", False),  # hex digits compare case-insensitively
        ("B", "00A1", False),  # the shorter is left-padded: 000B < 00A1
        ("00A10", "00A1", True),  # 00A10 > 000A1
        ("0100", "00B0", True),
    ],
)
def test_sequencers_compare_as_s3_says(candidate: str, applied: str | None, newer: bool) -> None:
    assert newer_sequencer(candidate, applied) is newer


@given(st.integers(min_value=0, max_value=2**64), st.integers(min_value=0, max_value=2**64))
def test_sequencer_order_is_numeric_order_whatever_the_padding(a: int, b: int) -> None:
    assert newer_sequencer(f"{a:X}", f"{b:016X}") is (a > b)


@pytest.mark.parametrize("doc_id", ["a", "a/b#c", "x" * 1024, "é" * 512, "日本/文書 #3"])
def test_ids_up_to_1024_bytes_are_accepted(doc_id: str) -> None:
    check_document_id(doc_id)


@pytest.mark.parametrize("doc_id", ["", "x" * 1025, "é" * 513, "a\x00b", "\ud800"])
def test_other_ids_are_refused(doc_id: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_document_id(doc_id)


@pytest.mark.parametrize(
    "metadata",
    [{"documentId": 1}, {"chunkIndex": 1}, {"k": "a\x00"}, {"k": float("nan")}, {"k": "x" * 17_000}],
)
def test_metadata_the_service_cannot_store_or_would_shadow_is_refused(metadata: dict[str, object]) -> None:
    with pytest.raises(InvalidRequestError):
        check_metadata(metadata)


def test_metadata_nests_up_to_the_depth_every_read_can_serialize() -> None:
    metadata: object = "leaf"
    for _ in range(MAX_METADATA_DEPTH - 1):
        metadata = [metadata]
    check_metadata({"k": metadata})
    for too_deep in ({"k": [metadata]}, {"k": {"k": metadata}}):
        with pytest.raises(InvalidRequestError, match="at most 32 levels"):
            check_metadata(too_deep)


def test_metadata_nested_beyond_any_recursion_limit_is_refused_not_crashed() -> None:
    metadata: object = 1
    for _ in range(100_000):
        metadata = {"k": metadata}
    with pytest.raises(InvalidRequestError, match="at most 32 levels"):
        check_metadata({"k": metadata})


@pytest.mark.parametrize("name", ["resolve", "", "a b", "-x", "x" * 129, "ünï"])
def test_store_names_follow_the_rule_and_resolve_is_reserved(name: str) -> None:
    with pytest.raises(InvalidRequestError):
        check_store_name(name)


def test_the_fingerprint_changes_with_whatever_shapes_chunks_and_vectors() -> None:
    base = fingerprint("text/plain", 1000, 150, "m")
    assert base == fingerprint("text/plain", 1000, 150, "m")
    others = [
        fingerprint("text/markdown", 1000, 150, "m"),
        fingerprint("text/plain", 999, 150, "m"),
        fingerprint("text/plain", 1000, 100, "m"),
        fingerprint("text/plain", 1000, 150, "other-model"),
    ]
    assert base not in others and len(set(others)) == len(others)


def test_a_single_document_hashes_its_bytes_and_records_hash_their_own_content() -> None:
    data = b"Plain text."
    prepared = prepare_source(SourceInput("a.txt", data, "text/plain", "a.txt", {"k": 1}), 1000, 0, "m")
    (doc,) = prepared.documents
    assert (
        doc.id == "a.txt" and doc.content_sha256 == prepared.source_sha256 == hashlib.sha256(data).hexdigest()
    )
    assert prepared.document_metadata(doc, {"k": 0, "s": 2}) == {
        "contentType": "text/plain",
        "fileName": "a.txt",
        "k": 1,  # the caller's metadata wins over the sidecar's
        "s": 2,
    }

    one = jsonl_bytes([{"_id": "r1", "text": "One."}, {"text": "Two."}])
    two = jsonl_bytes([{"_id": "r1", "text": "One."}, {"text": "Two, changed."}])
    first = prepare_source(SourceInput("f.jsonl", one), 1000, 0, "m")
    second = prepare_source(SourceInput("f.jsonl", two), 1000, 0, "m")
    assert [d.id for d in first.documents] == ["r1", "f.jsonl#2"]
    assert first.documents[0].content_sha256 == second.documents[0].content_sha256
    assert first.documents[1].content_sha256 != second.documents[1].content_sha256
    assert first.source_sha256 != second.source_sha256


def test_an_empty_source_is_refused() -> None:
    with pytest.raises(EmptyDocumentError):
        prepare_source(SourceInput("e.txt", b" \n ", "text/plain"), 1000, 0, "m")


@given(
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=300)
)
def test_cursors_round_trip_any_id(doc_id: str) -> None:
    assert decode_cursor(encode_cursor(doc_id)) == doc_id


def test_contextual_chunks_are_embedded_after_their_section_or_page_and_keep_their_text() -> None:
    from retrieval_core.documents.chunking import Chunk
    from retrieval_core.documents.prepare import PreparedDocument

    chunks = [
        Chunk("Stop the writers.", {"section": "Ops > Restoring"}),
        Chunk("Totals.", {"pageNumber": 60}),
    ]
    fixed = PreparedDocument("d", "Annual report", "h", {}, chunks)
    contextual = PreparedDocument("d", "Annual report", "h", {}, chunks, contextual=True)
    assert fixed.embedding_texts() == ["Annual report\n\nStop the writers.", "Annual report\n\nTotals."]
    assert contextual.embedding_texts() == [
        "Annual report\nOps > Restoring\n\nStop the writers.",
        "Annual report\npage 60\n\nTotals.",
    ]
    untitled = PreparedDocument("d", "", "h", {}, [Chunk("Plain.", {})], contextual=True)
    assert untitled.embedding_texts() == ["Plain."]


def test_the_contextual_strategy_changes_the_fingerprint_and_fixed_keeps_the_old_one() -> None:
    old = fingerprint("text/plain", 1000, 150, "m")
    assert fingerprint("text/plain", 1000, 150, "m", strategy="fixed") == old
    assert fingerprint("text/plain", 1000, 150, "m", strategy="contextual") != old
