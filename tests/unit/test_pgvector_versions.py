"""The pgvector version rules of the migrator (db.schema): what it accepts, updates and refuses."""

from __future__ import annotations

import pytest

from retrieval_core.db.schema import PGVECTOR_MINIMUM, at_least, pgvector_plan, version_tuple
from retrieval_core.exceptions import PgvectorVersionError


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("0.8.5", (0, 8, 5)), ("0.8", (0, 8)), ("0.10.0", (0, 10, 0)), ("0.9.0-dev", (0, 9, 0)), ("dev", ())],
)
def test_versions_parse_by_their_leading_numbers(text: str, parsed: tuple[int, ...]) -> None:
    assert version_tuple(text) == parsed


@pytest.mark.parametrize(
    ("version", "ok"),
    [
        *[("0.8.0", True), ("0.8", True), ("0.8.5", True), ("0.10.1", True), ("1.0", True)],
        *[("0.7.4", False), ("0.7.99", False), ("0.5.1", False), ("", False), ("unknown", False)],
    ],
)
def test_0_8_or_newer_is_required(version: str, ok: bool) -> None:
    # Compared as numbers: "0.10" is newer than "0.8", though not as text.
    assert at_least(version, PGVECTOR_MINIMUM) is ok


def test_a_new_enough_extension_is_left_alone_and_a_missing_one_is_created() -> None:
    assert pgvector_plan("0.8.0", "0.8.5") == "ready"
    assert pgvector_plan("0.8.0", None) == "ready"
    assert pgvector_plan(None, "0.8.0") == "create"


def test_an_old_installed_extension_is_updated_when_the_server_ships_a_new_enough_one() -> None:
    assert pgvector_plan("0.7.4", "0.8.0") == "update"
    assert pgvector_plan("0.5.1", "0.8.5") == "update"


def test_an_old_extension_without_a_newer_one_on_the_server_is_refused_naming_both() -> None:
    with pytest.raises(PgvectorVersionError) as raised:
        pgvector_plan("0.7.4", "0.7.4")
    assert raised.value.message.startswith(
        "pgvector 0.7.4 is installed and the newest pgvector this PostgreSQL server ships is 0.7.4; "
        "this service needs pgvector 0.8 or newer (iterative index scans)"
    )


def test_a_server_shipping_only_an_old_pgvector_is_refused_before_anything_is_created() -> None:
    with pytest.raises(
        PgvectorVersionError, match=r"^the newest pgvector this PostgreSQL server ships is 0\.7\.0;"
    ):
        pgvector_plan(None, "0.7.0")


def test_a_server_without_pgvector_is_refused() -> None:
    with pytest.raises(PgvectorVersionError, match="does not ship the pgvector extension"):
        pgvector_plan(None, None)
