"""CSV and JSON Lines: one document per record. Pure: no I/O.

Which columns make a record's id, title, text and metadata is `tables.py` (TableOptions, RowShape):
by default the BEIR names (`_id`, `title`, `text`) and those of ordinary exports, and a table with no
text column gets every column as `column: value` text lines. JSONL: a `metadata` object is merged into
the metadata (its keys win) unless metadata columns are named. CSV cells are strings, so as metadata
integers and decimals written plainly become numbers (decimals not in a `;`-separated file, where `.`
groups thousands), `true`/`false` booleans, and empty cells are left out (see `csv_value`); "1,234"
stays text.

Both read the decoded text one line at a time (`lines_of`): no list of every line, no copy per row.
The budget (parsers/budget.py) bounds each cell (each JSON line), the columns of a record, and the
time: the deadline is checked every few rows.

A record with no text is skipped and listed in `ParsedFile.skipped_records`: one blank row must not
refuse a whole export. Two records with the same id are refused: the second would replace the first.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from retrieval_core.parsers.base import Block, ParsedDocument, ParsedFile
from retrieval_core.parsers.budget import ParseMeter
from retrieval_core.parsers.detect import CSV, JSONL
from retrieval_core.parsers.exceptions import DocumentParseError
from retrieval_core.parsers.tables import DEFAULT_TABLE_OPTIONS, Row, RowShape, TableOptions, bounded
from retrieval_core.parsers.text import decode_text

METADATA_COLUMN = "metadata"

# Plain integers without a leading zero ("02134" is a code, not a number) and plain decimals.
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
# Python's csv refuses fields over 128 KiB by default; a long text cell is ordinary in a corpus. The
# limit is process-wide, so the budget's own (per write) is checked on each row instead.
_MAX_FIELD_CHARS = 64 * 1024 * 1024
# What a JSON escape can put in a string and PostgreSQL cannot store: NUL, half of a UTF-16 pair.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def csv_value(cell: str, decimals: bool = True) -> Any:
    """A CSV cell as metadata: integer, decimal (unless not `decimals`), boolean, else the string itself
    (None when empty)."""
    value = cell.strip()
    if not value:
        return None
    if _INTEGER.fullmatch(value):
        return int(value)
    if decimals and _DECIMAL.fullmatch(value):
        return float(value)
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return cell


def read_csv(
    data: bytes, charset: str | None, meter: ParseMeter, options: TableOptions = DEFAULT_TABLE_OPTIONS
) -> ParsedFile:
    """One document per data row; the first non-blank row names the columns (delimiter `,`, `;` or tab,
    whichever the header holds most of). The rows are read one at a time from the decoded text."""
    text = decode_text(data, CSV, charset)
    start = len(text) - len(text.lstrip("\n"))
    end = text.find("\n", start)
    header_line = text[start : end if end >= 0 else len(text)]
    delimiter = max((",", ";", "\t"), key=header_line.count)
    # `;` between cells is the export of a locale whose decimal mark is `,`: there `1.234` is a thousand
    # two hundred and thirty-four, and stays text like `1,5`.
    decimals = delimiter != ";"
    csv.field_size_limit(max(csv.field_size_limit(), _MAX_FIELD_CHARS))
    reader = csv.reader(lines_of(text), delimiter=delimiter, strict=True)
    try:
        rows = (row for row in reader if any(cell.strip() for cell in row))
        header = next(rows, [])
        _check_row(header, meter, reader.line_num)
        names = column_names(header)
        shape = RowShape(options, CSV, names)  # a named column the header lacks: refused here

        def records() -> Iterator[tuple[int, Row]]:
            for number, row in enumerate(rows, start=1):
                _check_row(row, meter, reader.line_num)
                if len(row) > len(names):
                    raise DocumentParseError(
                        CSV, f"line {reader.line_num}: {len(row)} fields but the header has {len(names)}"
                    )
                cells = dict(zip(names, row, strict=False))
                typed = {name: csv_value(cell, decimals) for name, cell in cells.items()}
                yield number, shape.shape(cells, typed)

        return _documents(CSV, records())
    except csv.Error as error:
        raise DocumentParseError(CSV, f"line {reader.line_num}: {error}") from None


def read_jsonl(
    data: bytes, charset: str | None, meter: ParseMeter, options: TableOptions = DEFAULT_TABLE_OPTIONS
) -> ParsedFile:
    """One document per line holding a JSON object; blank lines are ignored. Lines are read one at a time."""
    text = decode_text(data, JSONL, charset)
    shape = RowShape(options, JSONL)

    def records() -> Iterator[tuple[int, Row]]:
        number = 0
        for line_number, line in enumerate(lines_of(text), start=1):
            meter.tick()
            if not line.strip():
                continue
            meter.within("max_field_chars", len(line), f"line {line_number}: characters")
            record = _json_record(line, line_number)
            meter.within("max_columns", len(record), f"line {line_number}: fields")
            number += 1
            extra = record.pop(METADATA_COLUMN, None) if options.metadata_columns is None else None
            if extra is not None and not isinstance(extra, dict):
                raise DocumentParseError(JSONL, f"line {line_number}: 'metadata' must be an object")
            row = shape.shape(record)
            if extra:
                metadata = bounded({**row.metadata, **extra}.items(), keep_null=True)
                row = Row(row.record_id, row.title, row.text, metadata)
            yield number, row

    parsed = _documents(JSONL, records())
    shape.check_seen()
    return parsed


def _json_record(line: str, line_number: int) -> dict[str, Any]:
    """The JSON object of one line, every string in it storable; a DocumentParseError naming the line."""
    try:
        record = json.loads(line, parse_constant=_no_constant, parse_float=_finite_float)
    except ValueError as error:
        reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
        raise DocumentParseError(JSONL, f"line {line_number}: not valid JSON ({reason})") from None
    except RecursionError:
        raise DocumentParseError(JSONL, f"line {line_number}: nested too deep to read") from None
    if not isinstance(record, dict):
        found = type(record).__name__
        raise DocumentParseError(JSONL, f"line {line_number}: a JSON object expected, found {found}")
    unstorable = _unstorable_string(record)
    if unstorable is not None:
        path, reason = unstorable
        raise DocumentParseError(JSONL, f"line {line_number}: field '{path}' {reason}")
    return record


def lines_of(text: str) -> Iterator[str]:
    """The lines of `text`, each with its `\\n`, one at a time: no list of every line, no copy of the text."""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            yield text[start:]
            return
        yield text[start : end + 1]
        start = end + 1


def column_names(header: list[str]) -> list[str]:
    """The header's names, stripped; an empty one is `column<N>` (1-based), a repeated one `<name>_<N>`."""
    names: list[str] = []
    taken: set[str] = set()
    for position, cell in enumerate(header, start=1):
        name = cell.strip() or f"column{position}"
        candidate, count = name, 1
        while candidate.lower() in taken:
            count += 1
            candidate = f"{name}_{count}"
        taken.add(candidate.lower())
        names.append(candidate)
    return names


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON (or PostgreSQL's jsonb) can hold")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf):
        raise ValueError(f"{text[:40]} is beyond the range of a double")
    return value


def _unstorable_string(record: dict[str, Any]) -> tuple[str, str] | None:
    """The path of the first key or string PostgreSQL cannot store (a NUL, a lone surrogate), and why."""
    pending: list[tuple[str, Any]] = [("", record)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                where = f"{path}.{key}" if path else key
                if _UNSTORABLE.search(key):
                    return ascii(where)[1:-1], "has a key holding a NUL (\\u0000) or a lone surrogate"
                pending.append((where, child))
        elif isinstance(value, list):
            pending.extend((f"{path}[{i}]", child) for i, child in enumerate(value))
        elif isinstance(value, str) and _UNSTORABLE.search(value):
            return ascii(path)[1:-1], "holds a NUL (\\u0000) or a lone surrogate: PostgreSQL cannot store it"
    return None


def _check_row(row: list[str], meter: ParseMeter, line: int) -> None:
    """A checkpoint per row: its columns, and its longest cell, within the budget."""
    meter.tick()
    meter.within("max_columns", len(row), f"line {line}: columns")
    meter.within("max_field_chars", max(map(len, row), default=0), f"line {line}: characters in a cell")


def _documents(content_type: str, records: Iterable[tuple[int, Row]]) -> ParsedFile:
    documents: list[ParsedDocument] = []
    skipped: list[int] = []
    seen: dict[str, int] = {}
    for number, row in records:
        if row.record_id is not None:
            if row.record_id in seen:
                raise DocumentParseError(
                    content_type,
                    f"records {seen[row.record_id]} and {number} have the same id '{row.record_id[:80]}'",
                )
            seen[row.record_id] = number
        if not row.text:
            skipped.append(number)
            continue
        documents.append(
            ParsedDocument(
                [Block(row.text)],
                title=row.title,
                metadata={**row.metadata, "contentType": content_type},
                record_id=row.record_id,
                record_number=number,
            )
        )
    return ParsedFile(content_type, documents, skipped)
