"""parse() of spreadsheet exports: any columns, the default text lines, the named columns, the limits."""

from __future__ import annotations

import json

import pytest

from retrieval_core.documents.prepare import MAX_METADATA_BYTES, MAX_METADATA_KEYS, check_parsed, fingerprint
from retrieval_core.parsers import parse
from retrieval_core.parsers.detect import CSV, JSONL, PDF
from retrieval_core.parsers.exceptions import DocumentParseError, TableOptionsError, UnknownColumnError
from retrieval_core.parsers.tables import (
    MAX_METADATA_COLUMNS,
    MAX_ROW_METADATA_BYTES,
    MAX_TITLE_CHARS,
    TableOptions,
)
from tests.files import csv_bytes, jsonl_bytes
from tests.table_files import debian_csv, grants_export, wide_csv


def test_debian_csv_rows_are_column_lines_with_every_column_as_metadata() -> None:
    parsed = parse(debian_csv(), None, "debian.csv")
    assert len(parsed.documents) == 11 and parsed.skipped_records == []
    bookworm = parsed.documents[8]
    assert bookworm.blocks[0].text == (
        "version: 12\ncodename: Bookworm\nseries: bookworm\ncreated: 2021-08-14\nrelease: 2023-06-10\n"
        "eol: 2026-06-10\neol-lts: 2028-06-30\neol-elts: 2033-06-30"
    )
    assert bookworm.metadata["codename"] == "Bookworm" and bookworm.metadata["version"] == 12
    # Empty cells are neither a text line nor a metadata key.
    sid = parsed.documents[10]
    assert sid.blocks[0].text == "codename: Sid\nseries: sid\ncreated: 1993-08-16"
    assert sid.metadata == {"codename": "Sid", "series": "sid", "created": "1993-08-16", "contentType": CSV}
    assert (sid.record_id, sid.record_number, sid.title) == (None, 11, "")


def test_a_european_export_keeps_thousands_separators_and_quoted_line_breaks() -> None:
    parsed = parse(grants_export(8), None, "grants.csv")
    first, second = parsed.documents[:2]
    # BOM gone from the first column's name; `;` inside a quoted cell and a line break kept.
    assert first.metadata["Grant ID"] == "G-00000"
    assert "Summary: Funding round 1; first year\nsecond line of note 0" in first.blocks[0].text
    # "8.919" is eight thousand nine hundred and nineteen, not a decimal; "1,234" is text everywhere.
    assert second.metadata["Amount (EUR)"] == "8.919" and second.metadata["Year"] == 2016
    [row] = parse(csv_bytes([{"city": "Austin", "population": "961,855"}]), None, "us.csv").documents
    assert row.metadata["population"] == "961,855"


def test_tab_separated_and_headers_without_names() -> None:
    data = b"\n\nname\t\tname\tscore\nada\tx\ty\t3\n"
    [row] = parse(data, None, "scores.tsv").documents
    assert row.blocks[0].text == "name: ada\ncolumn2: x\nname_2: y\nscore: 3"
    assert row.metadata == {"name": "ada", "column2": "x", "name_2": "y", "score": 3, "contentType": CSV}


def test_named_text_id_title_and_metadata_columns() -> None:
    options = TableOptions(("Codename", "series"), "SERIES", "codename", ("version", "release"))
    parsed = parse(debian_csv(), None, "debian.csv", table=options)
    bookworm = parsed.documents[8]
    assert (bookworm.record_id, bookworm.title) == ("bookworm", "Bookworm")
    assert bookworm.blocks[0].text == "codename: Bookworm\nseries: bookworm"  # several: labelled lines
    assert bookworm.metadata == {"version": 12, "release": "2023-06-10", "contentType": CSV}
    [one] = parse(debian_csv(), None, "debian.csv", table=TableOptions(("codename",))).documents[:1]
    assert one.blocks[0].text == "Buzz"  # one: the value alone
    assert "codename" not in one.metadata and one.metadata["series"] == "buzz"


@pytest.mark.parametrize(
    ("options", "option", "column"),
    [
        (TableOptions(("name",)), "textColumns", "name"),
        (TableOptions(id_column="uuid"), "idColumn", "uuid"),
        (TableOptions(title_column="label"), "titleColumn", "label"),
        (TableOptions(metadata_columns=("version", "eol_lts")), "metadataColumns", "eol_lts"),
    ],
)
def test_a_named_column_the_header_lacks_is_refused_listing_the_columns(
    options: TableOptions, option: str, column: str
) -> None:
    with pytest.raises(UnknownColumnError) as caught:
        parse(debian_csv(), None, "debian.csv", table=options)
    error = caught.value
    assert error.code == "unknown_column" and error.status_code == 422
    assert f"no column '{column}'" in error.message and option in error.message
    assert "version, codename, series, created, release, eol, eol-lts, eol-elts" in error.message
    assert error.details["columns"][:3] == ["version", "codename", "series"]


def test_jsonl_records_without_a_text_field_and_named_fields() -> None:
    records = [
        {"sku": "A-1", "name": "Kettle", "price": 30, "tags": ["kitchen"]},
        {"sku": "B-2", "name": "Mug"},
    ]
    first, second = parse(jsonl_bytes(records), None, "products.jsonl").documents
    assert first.blocks[0].text == 'sku: A-1\nname: Kettle\nprice: 30\ntags: ["kitchen"]'
    assert first.metadata == {
        "sku": "A-1",
        "name": "Kettle",
        "price": 30,
        "tags": ["kitchen"],
        "contentType": JSONL,
    }
    options = TableOptions(("name",), "sku", metadata_columns=("price",))
    first, second = parse(jsonl_bytes(records), None, "products.jsonl", table=options).documents
    assert (first.record_id, first.blocks[0].text, first.metadata) == (
        "A-1",
        "Kettle",
        {"price": 30, "contentType": JSONL},
    )
    assert (second.record_id, second.metadata) == ("B-2", {"contentType": JSONL})
    with pytest.raises(UnknownColumnError, match="no column 'title'; its columns: sku, name, price, tags"):
        parse(jsonl_bytes(records), None, "products.jsonl", table=TableOptions(title_column="title"))


def test_a_wide_export_loads_with_the_first_columns_as_metadata_and_every_column_as_text() -> None:
    [row, _] = parse(wide_csv(80), None, "wide.csv").documents
    assert len(row.metadata) == MAX_METADATA_COLUMNS + 1  # and contentType
    assert row.metadata["c61"] == "r1c61" and "c62" not in row.metadata
    assert "c80: r1c80" in row.blocks[0].text
    check_parsed(row, "records[1]")  # within the write side's metadata rules
    assert MAX_METADATA_COLUMNS + 3 <= MAX_METADATA_KEYS  # contentType, fileName and title fit beside them
    named = tuple(f"c{c:02}" for c in range(1, MAX_METADATA_COLUMNS + 2))
    with pytest.raises(
        TableOptionsError, match=f"at most {MAX_METADATA_COLUMNS} metadata columns \\(got 62\\)"
    ):
        TableOptions(metadata_columns=named)


def test_long_cells_stay_searchable_but_out_of_the_metadata_and_titles_are_cut() -> None:
    rows = [
        {
            "title": "word " * 4000,
            "notes": "n" * 5000,
            **{f"k{i}": "v" * 1000 for i in range(20)},
            "last": "x",
        }
    ]
    [row] = parse(csv_bytes(rows), None, "long.csv").documents
    assert len(row.title) <= MAX_TITLE_CHARS and row.title.endswith("word...")
    assert "notes" not in row.metadata and "n" * 5000 in row.blocks[0].text
    assert len(json.dumps(row.metadata).encode()) <= MAX_ROW_METADATA_BYTES
    assert row.metadata["last"] == "x"  # a later short value still fits
    assert MAX_ROW_METADATA_BYTES + 4 * MAX_TITLE_CHARS + 2_048 <= MAX_METADATA_BYTES
    check_parsed(row, "records[1]")


def test_a_row_of_empty_cells_is_no_record_and_an_export_of_only_a_header_is_empty() -> None:
    parsed = parse(b"a,b\n1,2\n,\n3,4\n", None, "x.csv")
    assert [d.record_number for d in parsed.documents] == [1, 2]
    with pytest.raises(Exception, match="holds no text"):
        parse(b"a,b\n", None, "x.csv")


def test_a_row_longer_than_its_header_names_the_line() -> None:
    with pytest.raises(DocumentParseError, match="line 3: 3 fields but the header has 2"):
        parse(b"a,b\n1,2\n3,4,5\n", None, "x.csv")


def test_options_have_a_stable_key_and_a_json_form() -> None:
    assert TableOptions().key() == ""
    options = TableOptions(("b", "a"), "id", None, ("m",))
    assert options.key() == '{"idColumn":"id","metadataColumns":["m"],"textColumns":["b","a"]}'
    assert TableOptions.from_json(json.loads(options.key())) == options
    assert hash(options) == hash(TableOptions.from_json(options.to_json()))
    with pytest.raises(TableOptionsError, match=r"tableOptions\.textColumn: unknown"):
        TableOptions.from_json({"textColumn": "a"})
    with pytest.raises(TableOptionsError, match="must be a list of column names"):
        TableOptions.from_json({"textColumns": "a"})
    with pytest.raises(TableOptionsError, match="idColumn: a column name is 1 to 256 characters"):
        TableOptions(id_column=" ")


def test_options_change_the_fingerprint_of_row_formats_only() -> None:
    options = TableOptions(("codename",))
    plain = fingerprint(CSV, 1000, 150, "m")
    assert fingerprint(CSV, 1000, 150, "m", TableOptions()) == plain
    assert fingerprint(CSV, 1000, 150, "m", options) != plain
    assert fingerprint(PDF, 1000, 150, "m", options) == fingerprint(PDF, 1000, 150, "m")
