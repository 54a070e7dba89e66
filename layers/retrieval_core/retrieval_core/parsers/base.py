"""What every parser returns. Pure: no I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Block:
    """A structural unit of a document (a page, a section). Chunks never span two blocks.

    `metadata` is what the structure says of the block's text, e.g. `{"pageNumber": 3}` or
    `{"section": "Install > Linux"}`; every chunk cut from the block carries it.
    """

    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ParsedDocument:
    """One document read from a file: its blocks in order, its title and document-level metadata.

    Row formats (CSV, JSONL) give one ParsedDocument per record: `record_id` is the record's own id
    (from its id column) or None, and `record_number` its 1-based position in the file.
    """

    blocks: list[Block]
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    record_id: str | None = None
    record_number: int | None = None

    @property
    def text(self) -> str:
        """All the text, blocks separated by blank lines."""
        return "\n\n".join(block.text for block in self.blocks)


@dataclass(frozen=True, slots=True)
class ParsedFile:
    """What `parse` read: the content type it decided on, and the documents in the file.

    `skipped_records` lists, for a row format, the 1-based numbers of the records that hold no text
    and so became no document (reported rather than failing the whole file).
    """

    content_type: str
    documents: list[ParsedDocument]
    skipped_records: list[int] = field(default_factory=list)

    @property
    def is_records(self) -> bool:
        """True for row formats: each document is one record of the file."""
        return any(d.record_number is not None for d in self.documents)


def error_summary(error: Exception, limit: int = 160) -> str:
    """A short, single-line account of a library's exception for an error's reason: never a traceback."""
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
