"""parse() for CSV and JSON Lines: one document per record, the documented column mapping."""

from __future__ import annotations

import pytest

from retrieval_core.parsers import parse
from retrieval_core.parsers.detect import CSV, JSONL
from retrieval_core.parsers.exceptions import DocumentParseError, EmptyDocumentError
from tests.files import csv_bytes, jsonl_bytes


def test_beir_corpus_jsonl() -> None:
    data = jsonl_bytes(
        [
            {
                "_id": "d1",
                "title": "Install",
                "text": "Use apt.",
                "metadata": {"url": "https://x/1", "year": 2024},
            },
            {"_id": "d2", "title": "", "text": "Second passage.", "metadata": {}},
        ]
    )
    parsed = parse(data, None, "corpus.jsonl")
    assert parsed.content_type == JSONL and parsed.is_records
    first, second = parsed.documents
    assert (first.record_id, first.record_number, first.title) == ("d1", 1, "Install")
    assert first.blocks[0].text == "Use apt."
    assert first.metadata == {"url": "https://x/1", "year": 2024, "contentType": JSONL}
    assert (second.record_id, second.record_number, second.title) == ("d2", 2, "")


def test_jsonl_other_fields_become_metadata_and_the_metadata_object_wins() -> None:
    data = jsonl_bytes(
        [{"id": 7, "content": "Text.", "lang": "en", "tags": ["a"], "metadata": {"lang": "fr"}}]
    )
    [document] = parse(data, None, "x.ndjson").documents
    assert document.record_id == "7"
    assert document.metadata == {"lang": "fr", "tags": ["a"], "contentType": JSONL}


def test_malformed_json_line_names_the_line_number() -> None:
    data = b'{"_id": "1", "text": "ok"}\n\n{"_id": "2", "text": "broken",}\n'
    with pytest.raises(DocumentParseError) as caught:
        parse(data, None, "c.jsonl")
    assert caught.value.details["reason"].startswith("line 3: not valid JSON")


def test_a_jsonl_line_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(DocumentParseError, match="line 2: a JSON object expected, found list"):
        parse(b'{"text": "a"}\n[1, 2]\n', None, "c.jsonl")


def test_csv_export_mapping_and_typed_values() -> None:
    rows = [
        {"ID": "q1", "Title": "Install", "Body": "Use apt.", "year": "2024", "price": "9.50",
         "zip": "02134", "draft": "FALSE", "note": "", "ratio": "-0.25", "code": "1e3"},
    ]  # fmt: skip
    parsed = parse(csv_bytes(rows), "text/csv", "faq.csv")
    assert parsed.content_type == CSV
    [document] = parsed.documents
    assert (document.record_id, document.record_number, document.title) == ("q1", 1, "Install")
    assert document.blocks[0].text == "Use apt."
    # Integers and decimals become numbers so typed filters (year >= 2024) work; codes with a leading
    # zero and other strings stay strings; an empty cell is no key at all.
    assert document.metadata == {
        "year": 2024,
        "price": 9.5,
        "zip": "02134",
        "draft": False,
        "ratio": -0.25,
        "code": "1e3",
        "contentType": CSV,
    }


def test_csv_text_column_preference_and_beir_shape() -> None:
    data = csv_bytes([{"_id": "a", "id": "other", "text": "T", "content": "C", "body": "B"}])
    [document] = parse(data, None, "x.csv").documents
    assert document.record_id == "a" and document.blocks[0].text == "T"
    assert document.metadata == {"id": "other", "content": "C", "body": "B", "contentType": CSV}


def test_csv_with_excel_bom_semicolons_and_multiline_cells() -> None:
    data = csv_bytes(
        [{"id": "1", "text": 'Line one;\n"quoted" line two'}, {"id": "2", "text": "x"}], ";", bom=True
    )
    first, second = parse(data, None, "excel.csv").documents
    assert first.record_id == "1" and first.blocks[0].text == 'Line one;\n"quoted" line two'
    assert second.record_number == 2


def test_records_without_text_are_skipped_and_reported() -> None:
    data = csv_bytes(
        [{"id": "1", "text": "kept"}, {"id": "2", "text": "  "}, {"id": "3", "text": "kept too"}]
    )
    parsed = parse(data, None, "x.csv")
    assert [d.record_number for d in parsed.documents] == [1, 3]
    assert parsed.skipped_records == [2]
    parsed = parse(jsonl_bytes([{"text": None}, {"text": "kept"}, {"title": "no text"}]), None, "x.jsonl")
    assert [d.record_number for d in parsed.documents] == [2]
    assert parsed.skipped_records == [1, 3]


def test_records_all_without_text_are_empty() -> None:
    with pytest.raises(EmptyDocumentError):
        parse(csv_bytes([{"id": "1", "text": ""}]), None, "x.csv")


def test_csv_without_a_text_column_gets_every_column_as_text_lines() -> None:
    [document] = parse(csv_bytes([{"name": "a", "value": "1"}]), None, "x.csv").documents
    assert document.blocks[0].text == "name: a\nvalue: 1"
    assert document.metadata == {"name": "a", "value": 1, "contentType": CSV}


def test_jsonl_whose_first_record_has_no_text_field_gets_every_field_as_text_lines() -> None:
    parsed = parse(jsonl_bytes([{"_id": "1", "passage": "x"}, {"_id": "2", "passage": "y"}]), None, "x.jsonl")
    assert [(d.record_id, d.text) for d in parsed.documents] == [
        ("1", "_id: 1\npassage: x"),
        ("2", "_id: 2\npassage: y"),
    ]


def test_duplicate_ids_are_refused() -> None:
    with pytest.raises(DocumentParseError, match="records 1 and 3 have the same id 'a'"):
        parse(
            jsonl_bytes([{"_id": "a", "text": "x"}, {"_id": "b", "text": "y"}, {"_id": "a", "text": "z"}]),
            None,
            "x.jsonl",
        )


def test_csv_row_with_too_many_fields_or_a_broken_quote_names_the_line() -> None:
    with pytest.raises(DocumentParseError, match="line 3: 3 fields but the header has 2"):
        parse(b"id,text\n1,ok\n2,a,b\n", None, "x.csv")
    with pytest.raises(DocumentParseError, match="line 2"):
        parse(b'id,text\n1,"never closed\n', None, "x.csv")


def test_a_long_text_cell_is_read() -> None:
    long = "word " * 60_000
    [document] = parse(csv_bytes([{"id": "1", "text": long}]), None, "x.csv").documents
    assert document.blocks[0].text == long.strip()


def test_the_csv_example_in_docs_formats_md() -> None:
    data = b"id,title,text,year,zip,draft\nq1,Install,Use apt on Linux.,2024,02134,false\nq2,Empty,,2023,,\n"
    parsed = parse(data, None, "faq.csv")
    [document] = parsed.documents
    assert (document.record_id, document.record_number, document.title) == ("q1", 1, "Install")
    assert document.text == "Use apt on Linux."
    assert document.metadata == {"year": 2024, "zip": "02134", "draft": False, "contentType": CSV}
    assert parsed.skipped_records == [2]
