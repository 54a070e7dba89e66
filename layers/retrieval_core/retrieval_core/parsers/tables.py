"""Which columns of a table (CSV rows, JSON Lines records) make a record's id, title, text and metadata.
Pure: no I/O.

`TableOptions` is what a caller names (CLI flags, the document PUT's query parameters, a sidecar's
`tableOptions`); `RowShape` applies it to one file's records. Unnamed, the columns are found by name
(case-insensitively):
- id: `_id`, else `id`; title: `title`;
- text: `text`, else `content`, else `body`; a table with none of them (a spreadsheet export) gets every
  non-empty column as text, one `column: value` line each, so that a row is found by any of its values;
- metadata: every other column, kept within what a document's metadata may hold (see `bounded`).
A named column the table does not have is an UnknownColumnError naming the columns it has.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from retrieval_core.parsers.exceptions import TableOptionsError, UnknownColumnError

ID_COLUMNS = ("_id", "id")
TEXT_COLUMNS = ("text", "content", "body")
TITLE_COLUMN = "title"

# A document's metadata holds at most 64 keys and 16,384 bytes of JSON (documents/prepare.py,
# MAX_METADATA_KEYS and MAX_METADATA_BYTES), its contentType, fileName and title included. Unnamed
# metadata columns are kept within these (first columns first); what is left out stays in the row's text
# when the text is every column. Named metadata columns beyond MAX_METADATA_COLUMNS are refused.
MAX_METADATA_COLUMNS = 61
MAX_METADATA_VALUE_CHARS = 1_024
MAX_ROW_METADATA_BYTES = 12_288
# A title is shown with every chunk and embedded before it: a long cell is cut here, on a word.
MAX_TITLE_CHARS = 512
MAX_COLUMN_NAME_CHARS = 256
_MAX_SEEN = 1_000  # JSON Lines: distinct field names remembered to name in an UnknownColumnError


@dataclass(frozen=True, slots=True)
class TableOptions:
    """The columns a caller names; unnamed ones are found as the module says. Immutable and hashable;
    `key()` is a stable string of what it changes in a parse ("" for the defaults)."""

    text_columns: tuple[str, ...] = ()
    id_column: str | None = None
    title_column: str | None = None
    metadata_columns: tuple[str, ...] | None = None  # None: every other column, bounded

    def __post_init__(self) -> None:
        for option, name in self.named():
            if not name.strip() or len(name) > MAX_COLUMN_NAME_CHARS:
                raise TableOptionsError(option, f"a column name is 1 to {MAX_COLUMN_NAME_CHARS} characters")
        if self.metadata_columns is not None and len(self.metadata_columns) > MAX_METADATA_COLUMNS:
            raise TableOptionsError(
                "metadataColumns",
                f"at most {MAX_METADATA_COLUMNS} metadata columns (got {len(self.metadata_columns)}): "
                "a document's metadata holds 64 keys, its contentType, fileName and title included",
            )

    def named(self) -> list[tuple[str, str]]:
        """Each column named, with the option (its JSON key) that names it."""
        return [
            *(("textColumns", name) for name in self.text_columns),
            *(("idColumn", name) for name in [self.id_column] if name is not None),
            *(("titleColumn", name) for name in [self.title_column] if name is not None),
            *(("metadataColumns", name) for name in self.metadata_columns or ()),
        ]

    @classmethod
    def from_json(cls, value: Any, where: str = "tableOptions") -> TableOptions:
        """Options from their JSON form (`{"textColumns": [...], "idColumn": ..., "titleColumn": ...,
        "metadataColumns": [...]}`, every key optional); a TableOptionsError for any other shape."""
        if not isinstance(value, dict):
            raise TableOptionsError(where, "must be a JSON object")
        unknown = sorted(set(value) - {"textColumns", "idColumn", "titleColumn", "metadataColumns"})
        if unknown:
            raise TableOptionsError(
                f"{where}.{unknown[0]}", "unknown; use textColumns, idColumn, titleColumn, metadataColumns"
            )

        def names(key: str) -> tuple[str, ...] | None:
            found = value.get(key)
            if found is None:
                return None
            if not isinstance(found, list) or not all(isinstance(n, str) for n in found):
                raise TableOptionsError(f"{where}.{key}", "must be a list of column names")
            return tuple(found)

        def name(key: str) -> str | None:
            found = value.get(key)
            if found is not None and not isinstance(found, str):
                raise TableOptionsError(f"{where}.{key}", "must be a column name (a string)")
            return found

        text = names("textColumns") or ()
        return cls(text, name("idColumn"), name("titleColumn"), names("metadataColumns"))

    def to_json(self) -> dict[str, Any]:
        """The JSON form `from_json` reads, without the keys left to their defaults."""
        body: dict[str, Any] = {}
        if self.text_columns:
            body["textColumns"] = list(self.text_columns)
        if self.id_column is not None:
            body["idColumn"] = self.id_column
        if self.title_column is not None:
            body["titleColumn"] = self.title_column
        if self.metadata_columns is not None:
            body["metadataColumns"] = list(self.metadata_columns)
        return body

    def key(self) -> str:
        """A stable string of the options ("" for the defaults): two equal options have equal keys."""
        body = self.to_json()
        return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":")) if body else ""


DEFAULT_TABLE_OPTIONS = TableOptions()


@dataclass(frozen=True, slots=True)
class Row:
    """One record shaped: its id, title, text and metadata (values as the file gave them)."""

    record_id: str | None
    title: str
    text: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Columns:
    """The names a record's parts come from (None: not there)."""

    id: str | None
    title: str | None
    text: list[str]
    every: bool  # the text is every column (none named, no text column found)
    labelled: bool  # text as `column: value` lines
    taken: set[str | None]  # left out of unnamed metadata
    metadata: list[str] | None  # None: every column not taken, bounded


class RowShape:
    """Applies TableOptions to the records of one file.

    With `header` (CSV), every named column is looked up once, and a missing one is an UnknownColumnError
    at once. Without it (JSON Lines, whose records may differ), columns are looked up in each record;
    `check_seen` then refuses a named column that no record had. Without named text columns, the header
    (else the first record) decides whether the text is a text column or every column.
    """

    def __init__(self, options: TableOptions, content_type: str, header: list[str] | None = None) -> None:
        self.options = options
        self.content_type = content_type
        self.header = header
        self._all_columns_text: bool | None = None
        self._seen: dict[str, str] = {}  # lowered name -> name, as first met (JSON Lines), to name in errors
        self._found: set[str] = set()  # named columns met at least once (JSON Lines)
        self._fixed = self._columns(header) if header is not None else None

    def shape(self, record: Mapping[str, Any], metadata_values: Mapping[str, Any] | None = None) -> Row:
        """The record's parts. `metadata_values`: the record's values as metadata, id and title when they
        differ from its text form (a CSV cell typed as a number); by default the record's own values."""
        columns = self._fixed or self._columns(list(record))
        values = record if metadata_values is None else metadata_values
        if len(columns.text) == 1 and not columns.labelled:
            text = _text(record.get(columns.text[0]))  # the usual corpus: one text column
        else:
            parts = [(name, _text(record.get(name))) for name in (record if columns.every else columns.text)]
            if columns.labelled:
                text = "\n".join(f"{name}: {value}" for name, value in parts if value)
            else:
                text = "\n\n".join(value for _, value in parts if value)
        if columns.metadata is None:
            metadata = bounded((name, value) for name, value in values.items() if name not in columns.taken)
        else:
            metadata = {n: values[n] for n in columns.metadata if values.get(n) is not None}
        record_id = values.get(columns.id) if columns.id is not None else None
        title = values.get(columns.title) if columns.title is not None else None
        return Row(
            None if record_id is None or record_id == "" else str(record_id),
            short_title(title),
            text,
            metadata,
        )

    def check_seen(self) -> None:
        """An UnknownColumnError for a named column no record had (JSON Lines, once every record is read)."""
        for option, name in self.options.named():
            if name not in self._found:
                raise UnknownColumnError(self.content_type, option, name, list(self._seen.values()))

    def _columns(self, names: list[str]) -> _Columns:
        lowered = {name.lower(): name for name in reversed(names)}
        if self.header is None:
            for name in names[: max(0, _MAX_SEEN - len(self._seen))]:
                self._seen.setdefault(name.lower(), name)
        options = self.options
        id_name = self._find(lowered, options.id_column, ID_COLUMNS, "idColumn")
        title_name = self._find(lowered, options.title_column, (TITLE_COLUMN,), "titleColumn")
        if options.text_columns:
            found = [self._find(lowered, n, (), "textColumns") for n in options.text_columns]
            text = [n for n in found if n is not None]
            every, labelled = False, len(options.text_columns) > 1
        else:
            text_name = self._find(lowered, None, TEXT_COLUMNS, "textColumns")
            if self._all_columns_text is None:
                self._all_columns_text = text_name is None
            every = labelled = self._all_columns_text
            text = [] if every or text_name is None else [text_name]
        metadata = None
        if options.metadata_columns is not None:
            found = [self._find(lowered, n, (), "metadataColumns") for n in options.metadata_columns]
            metadata = [n for n in found if n is not None]
        taken = {id_name, title_name, *text}
        return _Columns(id_name, title_name, text, every, labelled, taken, metadata)

    def _find(
        self, lowered: dict[str, str], named: str | None, defaults: tuple[str, ...], option: str
    ) -> str | None:
        if named is None:
            return next((lowered[c] for c in defaults if c in lowered), None)
        found = lowered.get(named.strip().lower())
        if found is None and self.header is not None:
            raise UnknownColumnError(self.content_type, option, named, self.header)
        if found is not None:
            self._found.add(named)
        return found


def bounded(items: Iterable[tuple[str, Any]], keep_null: bool = False) -> dict[str, Any]:
    """Metadata from unnamed columns, in order: values of at most MAX_METADATA_VALUE_CHARS characters, at
    most MAX_METADATA_COLUMNS keys and MAX_ROW_METADATA_BYTES bytes of JSON; None left out unless
    `keep_null` (a JSON Lines `metadata` object's null is a value: EXISTS finds it)."""
    metadata: dict[str, Any] = {}
    size = 2  # {}
    for name, value in items:
        if value is None and not keep_null:
            continue
        if len(metadata) == MAX_METADATA_COLUMNS:
            break
        if isinstance(value, str) and len(value) > MAX_METADATA_VALUE_CHARS:
            continue
        entry = _name_size(name) + _json_size(value) + 2  # a colon and a comma
        if size + entry > MAX_ROW_METADATA_BYTES:
            continue
        metadata[name] = value
        size += entry
    return metadata


def _json_size(value: Any) -> int:
    """Bytes of `value` as JSON (UTF-8, not ASCII-escaped); counted without encoding the plain cases."""
    if isinstance(value, str):
        if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
            return len(value) + 2
    elif isinstance(value, bool):
        return 5 if value is False else 4
    elif isinstance(value, (int, float)):
        return len(repr(value))
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


_name_size = functools.lru_cache(maxsize=4_096)(_json_size)  # a table's column names repeat on every row


def short_title(value: Any) -> str:
    """A cell as a title: whitespace collapsed, cut on a word at MAX_TITLE_CHARS characters ("..." ends it:
    the normalisation every parse ends with would turn "…" into that anyway)."""
    if value is None:
        return ""
    title = " ".join((value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)).split())
    if len(title) <= MAX_TITLE_CHARS:
        return title
    cut = title[: MAX_TITLE_CHARS - 3]
    space = cut.rfind(" ")
    return (cut[:space] if space > MAX_TITLE_CHARS // 2 else cut) + "..."


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, ensure_ascii=False)
