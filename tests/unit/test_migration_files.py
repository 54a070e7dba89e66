"""The migration files as data: names, versions, descriptions, the no-transaction marker, statements."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from retrieval_core.db.migrations.statements import split_statements
from retrieval_core.db.migrations.steps import (
    MIGRATIONS,
    SCHEMA_VERSION,
    VERSIONS_FOLDER,
    Migration,
    load_migrations,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_shipped_versions_are_consecutive_files_each_described_by_its_first_line() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    assert SCHEMA_VERSION == 19
    assert MIGRATIONS[0].description == "stores, documents, chunks"
    assert (
        MIGRATIONS[10].description
        == "keyword_terms.max_weight: per-lexeme bounds that prune the BM25 search harder"
    )
    assert MIGRATIONS[11].description == (
        "stores share their keyword and metadata indexes: scoped by store id, nothing per store"
    )
    assert MIGRATIONS[12].description == "stores: indexes for paged store lists and display-name lookups"
    assert MIGRATIONS[13].description == (
        "shared_indexes_ready(); no GIN pending lists; keyword_hits reads the shared index for any store"
    )
    assert MIGRATIONS[16].description == (
        "document_status and ingestion_counts: each source's last outcome, each store's counts; "
        "documents.source_key"
    )
    assert MIGRATIONS[17].description == (
        "documents: an index on each store's content hashes, for duplicates found at write time"
    )
    assert not any(m.outside_transaction for m in MIGRATIONS)
    assert len({m.checksum for m in MIGRATIONS}) == len(MIGRATIONS)


def test_the_wheel_and_the_layer_ship_the_sql_files() -> None:
    # The layer copies the package folder whole (layers/retrieval_core/Makefile: cp -R); a wheel or an
    # install takes what package-data names.
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = package_data["retrieval_core.db.migrations"]
    for path in VERSIONS_FOLDER.glob("*.sql"):
        assert any(fnmatch(path.relative_to(VERSIONS_FOLDER.parent).as_posix(), p) for p in patterns)
    assert "cp -R retrieval_core" in (REPO / "layers" / "retrieval_core" / "Makefile").read_text()


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({"0001_first.sql": "-- first\nSELECT 1;", "0003_third.sql": "-- third\n"}, "expected 2"),
        ({"1_first.sql": "-- first\n"}, "named NNNN_<lowercase_slug>.sql"),
        ({"0001_First.sql": "-- first\n"}, "named NNNN_<lowercase_slug>.sql"),
        ({"0001_first.sql": "SELECT 1;\n"}, "the first line is a comment giving the description"),
        ({"0001_first.sql": "-- migrate: no-transaction\n-- first\n"}, "the first line is a comment"),
    ],
)
def test_a_misnamed_or_undescribed_file_is_refused(tmp_path: Path, files: dict[str, str], error: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ValueError, match=error):
        load_migrations(tmp_path)


def test_files_load_in_version_order_with_crlf_read_as_lf(tmp_path: Path) -> None:
    (tmp_path / "0002_second.sql").write_bytes(b"-- second\r\n-- migrate: no-transaction\r\nSELECT 2;\r\n")
    (tmp_path / "0001_first.sql").write_text("-- first\nSELECT 1;\n")
    first, second = load_migrations(tmp_path)
    assert first == Migration(1, "first", "-- first\nSELECT 1;\n") and not first.outside_transaction
    assert second == Migration(2, "second", "-- second\n-- migrate: no-transaction\nSELECT 2;\n")
    assert second.outside_transaction


def test_the_marker_counts_only_among_the_leading_comments() -> None:
    assert Migration(1, "a", "-- a\n\n  -- migrate: no-transaction\nSELECT 1;").outside_transaction
    assert not Migration(1, "a", "-- a\nSELECT 1;\n-- migrate: no-transaction\n").outside_transaction
    assert not Migration(1, "a", "-- a\n-- migrate: no-transaction please\nSELECT 1;").outside_transaction


def test_statements_split_at_semicolons_outside_quotes_comments_and_dollar_quotes() -> None:
    sql = """-- header; with a semicolon
CREATE INDEX CONCURRENTLY a ON t (x);
/* block; /* nested; */ still; */ SELECT 'it''s; quoted', E'esc\\'; aped', "odd;name" FROM t;
CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$;
DO $$ BEGIN PERFORM 1; END $$;
-- trailing comment; only
"""
    assert split_statements(sql) == [
        "-- header; with a semicolon\nCREATE INDEX CONCURRENTLY a ON t (x)",
        "/* block; /* nested; */ still; */ SELECT 'it''s; quoted', E'esc\\'; aped', \"odd;name\" FROM t",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $f$ SELECT 1; $f$",
        "DO $$ BEGIN PERFORM 1; END $$",
    ]


def test_a_last_statement_without_a_semicolon_and_empty_statements() -> None:
    assert split_statements(";;SELECT 1;  ;\nSELECT 2") == ["SELECT 1", "SELECT 2"]
    assert split_statements("-- nothing\n/* at all */\n") == []
    # A standard string's backslash escapes nothing; a $n parameter is no dollar quote.
    assert split_statements("SELECT '\\'; SELECT $1; SELECT x$y$z; SELECT 2") == [
        "SELECT '\\'",
        "SELECT $1",
        "SELECT x$y$z",
        "SELECT 2",
    ]
