"""The migrations as data: one SQL file per version in `versions/`, read once at import.

Pure apart from reading the package's own files: no database, no driver.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

VERSIONS_FOLDER = Path(__file__).with_name("versions")
# A leading comment line that makes a step run outside a transaction (package docstring).
NO_TRANSACTION_MARKER = "-- migrate: no-transaction"

_FILE_NAME = re.compile(r"^(?P<version>\d{4})_[a-z0-9_]+\.sql$")


class Migration(NamedTuple):
    """One version: its number, its description (the file's first comment line) and its SQL (the file)."""

    version: int
    description: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the SQL, hex: what `schema_migrations.checksum` records once the step is applied."""
        return hashlib.sha256(self.sql.encode("utf-8")).hexdigest()

    @property
    def outside_transaction(self) -> bool:
        """True when the step's leading comments hold the no-transaction marker."""
        for line in self.sql.splitlines():
            stripped = line.strip()
            if stripped == NO_TRANSACTION_MARKER:
                return True
            if stripped and not stripped.startswith("--"):
                return False
        return False


def load_migrations(folder: Path = VERSIONS_FOLDER) -> list[Migration]:
    """Every `NNNN_<slug>.sql` of `folder`, in version order; ValueError when a name, a number or a
    description line is not as the package docstring says (a packaging mistake, caught by the tests)."""
    migrations: list[Migration] = []
    for path in sorted(folder.glob("*.sql")):
        match = _FILE_NAME.match(path.name)
        if match is None:
            raise ValueError(f"{path.name}: a migration file is named NNNN_<lowercase_slug>.sql")
        version = int(match["version"])
        if version != len(migrations) + 1:
            raise ValueError(
                f"{path.name}: versions are consecutive from 0001; expected {len(migrations) + 1}"
            )
        # read_text turns CRLF into LF: a checkout's line endings do not change the checksum.
        sql = path.read_text(encoding="utf-8")
        first = sql.split("\n", 1)[0]
        if not first.startswith("-- ") or first == NO_TRANSACTION_MARKER:
            raise ValueError(f"{path.name}: the first line is a comment giving the description ('-- ...')")
        migrations.append(Migration(version, first[3:].strip(), sql))
    return migrations


def as_migrations(given: Sequence[tuple[int, str, str]]) -> list[Migration]:
    """(version, description, sql) tuples as Migration values."""
    return [Migration(*item) for item in given]


MIGRATIONS: list[Migration] = load_migrations()

# The schema version this code needs: the newest migration's.
SCHEMA_VERSION = MIGRATIONS[-1].version
