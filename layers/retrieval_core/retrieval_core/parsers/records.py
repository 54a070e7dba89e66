"""CSV and JSON Lines: one document per record. Pure: no I/O.

Column mapping, chosen to read both BEIR corpora (`_id`, `title`, `text`, `metadata`) and ordinary
exports (names matched case-insensitively):
- id: `_id`, else `id` → `record_id`;
- text: `text`, else `content`, else `body` → the record's one block;
- `title` → the document's title;
- JSONL: a `metadata` object is merged into the metadata (its keys win);
- every other column → metadata. CSV cells are strings, so integers and decimals written plainly
  become numbers, `true`/`false` booleans, and empty cells are left out (see `csv_value`).

A record with no text is skipped and listed in `ParsedFile.skipped_records`: one blank row must not
refuse a whole export. Two records with the same id are refused: the second would replace the first.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

from retrieval_core.parsers.base import Block, ParsedDocument, ParsedFile
from retrieval_core.parsers.detect import CSV, JSONL
from retrieval_core.parsers.exceptions import DocumentParseError
from retrieval_core.parsers.text import decode_text

ID_COLUMNS = ("_id", "id")
TEXT_COLUMNS = ("text", "content", "body")
TITLE_COLUMN = "title"
METADATA_COLUMN = "metadata"

# Plain integers without a leading zero ("02134" is a code, not a number) and plain decimals.
_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
# Python's csv refuses fields over 128 KiB by default; a long text cell is ordinary in a corpus.
_MAX_FIELD_CHARS = 64 * 1024 * 1024
# What a JSON escape can put in a string and PostgreSQL cannot store: NUL, half of a UTF-16 pair.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def csv_value(cell: str) -> Any:
    """A CSV cell as metadata: integer, decimal, boolean, else the string itself (None when empty)."""
    value = cell.strip()
    if not value:
        return None
    if _INTEGER.fullmatch(value):
        return int(value)
    if _DECIMAL.fullmatch(value):
        return float(value)
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return cell


def read_csv(data: bytes, charset: str | None) -> ParsedFile:
    """One document per data row; the header row names the columns (delimiter `,`, `;` or tab)."""
    text = decode_text(data, CSV, charset)
    header_line = text.lstrip("\n").split("\n", 1)[0]
    delimiter = max((",", ";", "\t"), key=header_line.count)
    csv.field_size_limit(max(csv.field_size_limit(), _MAX_FIELD_CHARS))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader, [])
        names = [name.strip() for name in header]
        mapping = _mapping(CSV, names)

        def rows() -> Iterator[tuple[int, dict[str, Any]]]:
            for number, row in enumerate((r for r in reader if any(cell.strip() for cell in r)), start=1):
                if len(row) > len(names):
                    raise DocumentParseError(
                        CSV, f"line {reader.line_num}: {len(row)} fields but the header has {len(names)}"
                    )
                yield number, {name: csv_value(cell) for name, cell in zip(names, row, strict=False)}

        return _documents(CSV, rows(), mapping)
    except csv.Error as error:
        raise DocumentParseError(CSV, f"line {reader.line_num}: {error}") from None


def read_jsonl(data: bytes, charset: str | None) -> ParsedFile:
    """One document per line holding a JSON object; blank lines are ignored."""
    text = decode_text(data, JSONL, charset)

    def records() -> Iterator[tuple[int, dict[str, Any]]]:
        number = 0
        for line_number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
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
            extra = record.get(METADATA_COLUMN)
            if extra is not None and not isinstance(extra, dict):
                raise DocumentParseError(JSONL, f"line {line_number}: 'metadata' must be an object")
            unstorable = _unstorable_string(record)
            if unstorable is not None:
                path, reason = unstorable
                raise DocumentParseError(JSONL, f"line {line_number}: field '{path}' {reason}")
            number += 1
            yield number, record

    return _documents(JSONL, records(), None)


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


def _mapping(content_type: str, names: list[str], required: bool = True) -> dict[str, str | None]:
    """Which column holds the id, the text and the title (case-insensitive); `required`: a text column."""
    lowered = {name.lower(): name for name in reversed(names)}
    mapping = {
        "id": next((lowered[c] for c in ID_COLUMNS if c in lowered), None),
        "text": next((lowered[c] for c in TEXT_COLUMNS if c in lowered), None),
        "title": lowered.get(TITLE_COLUMN),
    }
    if mapping["text"] is None and required:
        shown = ", ".join(names[:20]) or "none"
        raise DocumentParseError(content_type, f"no text column (text, content or body); columns: {shown}")
    return mapping


def _documents(
    content_type: str,
    records: Iterable[tuple[int, dict[str, Any]]],
    mapping: dict[str, str | None] | None,
) -> ParsedFile:
    documents: list[ParsedDocument] = []
    skipped: list[int] = []
    seen: dict[str, int] = {}
    texts_found = mapping is not None
    names: list[str] = []
    for number, record in records:
        names = list(record)
        columns = mapping or _mapping(content_type, names, required=False)
        texts_found = texts_found or columns["text"] is not None
        fields = dict(record)
        record_id = _pop(fields, columns["id"])
        body = _pop(fields, columns["text"])
        title = _pop(fields, columns["title"])
        if record_id is not None:
            record_id = str(record_id)
            if record_id in seen:
                raise DocumentParseError(
                    content_type,
                    f"records {seen[record_id]} and {number} have the same id '{record_id[:80]}'",
                )
            seen[record_id] = number
        if body is not None and not isinstance(body, str):
            body = json.dumps(body) if content_type == JSONL else str(body)
        if not body or not body.strip():
            skipped.append(number)
            continue
        extra = fields.pop(METADATA_COLUMN, None) if content_type == JSONL else None
        metadata = {key: value for key, value in fields.items() if value is not None}
        metadata.update(extra or {})
        metadata["contentType"] = content_type
        documents.append(
            ParsedDocument(
                [Block(body.strip())],
                title="" if title is None else " ".join(str(title).split()),
                metadata=metadata,
                record_id=record_id,
                record_number=number,
            )
        )
    if skipped and not texts_found:
        # Not one record has a text field: the file's shape is wrong, not just some records empty.
        _mapping(content_type, names)
    return ParsedFile(content_type, documents, skipped)


def _pop(fields: dict[str, Any], column: str | None) -> Any:
    return fields.pop(column, None) if column is not None else None
