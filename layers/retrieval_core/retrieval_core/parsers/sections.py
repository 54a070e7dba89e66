"""Heading paths ("Guide > Install > Linux") and blocks per section, for every structured format."""

from __future__ import annotations

from retrieval_core.parsers.base import Block

SEPARATOR = " > "


class SectionBlocks:
    """Collects a document's text into one block per heading section.

    Each block's metadata carries `section`, the path of headings above it; text before the first
    heading has no `section`. A section holding nothing but its heading makes no block: its title
    lives on in the paths of the sections below it.
    """

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._path: list[tuple[int, str]] = []
        self._parts: list[str] = []
        self._has_body = False

    def heading(self, level: int, title: str) -> None:
        """Start a section at heading `level` (1 = top)."""
        self._flush()
        title = " ".join(title.split())
        while self._path and self._path[-1][0] >= level:
            self._path.pop()
        if title:
            self._path.append((level, title))
            self._parts.append(title)

    def text(self, text: str) -> None:
        """Add a paragraph (or table, list, code block) to the current section."""
        if text.strip():
            self._parts.append(text.strip())
            self._has_body = True

    def finish(self) -> list[Block]:
        """The blocks, in document order."""
        self._flush()
        return self.blocks

    def _flush(self) -> None:
        if self._has_body:
            metadata = {"section": SEPARATOR.join(t for _, t in self._path)} if self._path else {}
            self.blocks.append(Block("\n\n".join(self._parts), metadata))
        self._parts, self._has_body = [], False
