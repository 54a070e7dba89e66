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
    """What `parse` read: the content type it decided on, and the documents in the file."""

    content_type: str
    documents: list[ParsedDocument]

    @property
    def is_records(self) -> bool:
        """True for row formats: each document is one record of the file."""
        return any(d.record_number is not None for d in self.documents)
