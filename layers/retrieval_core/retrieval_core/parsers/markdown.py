"""Markdown: one block per heading section, `section` = the heading path. Pure: no I/O.

markdown-it-py (a CommonMark parser) finds the headings, so `#` inside a fenced code block, an
HTML block or a list item is not taken for one, and setext headings (underlined) are. The blocks
keep the Markdown source text as written. The budget's checkpoints run inside markdown-it, as rules.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from retrieval_core.parsers.base import ParsedDocument, ParsedFile
from retrieval_core.parsers.budget import ParseMeter
from retrieval_core.parsers.detect import MARKDOWN
from retrieval_core.parsers.sections import SectionBlocks
from retrieval_core.parsers.text import decode_text

if TYPE_CHECKING:
    from markdown_it.token import Token

# YAML front matter (Jekyll, Hugo, MkDocs): metadata for the site generator, not text to index.
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)


def read_markdown(data: bytes, charset: str | None, meter: ParseMeter) -> ParsedFile:
    """Blocks per heading section; title = the first level-1 heading."""
    from markdown_it import MarkdownIt

    text = _FRONT_MATTER.sub("", decode_text(data, MARKDOWN, charset), count=1)
    lines = text.split("\n")
    parser = MarkdownIt("commonmark")
    # A checkpoint before every block rule and every inline rule is tried: markdown-it reads a whole
    # file in one call (seconds for a few MB of `[` or of short headings), and these are its loops.
    parser.block.ruler.before("table", "checkpoint", lambda *_: _checkpoint(meter))
    parser.inline.ruler.before("text", "checkpoint", lambda *_: _checkpoint(meter))
    tokens = parser.parse(text)
    sections = SectionBlocks()
    title = ""
    start = 0
    for index, token in enumerate(tokens):
        meter.tick()
        # Only top-level headings make sections: one inside a blockquote or list item is quoted text.
        if token.type != "heading_open" or token.level != 0 or token.map is None:
            continue
        sections.text("\n".join(lines[start : token.map[0]]))
        heading = _inline_text(tokens[index + 1])
        level = int(token.tag[1])
        if level == 1 and not title:
            title = heading
        sections.heading(level, heading)
        start = token.map[1]
    sections.text("\n".join(lines[start:]))
    document = ParsedDocument(sections.finish(), title=title, metadata={"contentType": MARKDOWN})
    return ParsedFile(MARKDOWN, [document])


def _checkpoint(meter: ParseMeter) -> bool:
    """A rule that matches nothing: the budget's checkpoint."""
    meter.tick()
    return False


def _inline_text(token: Token) -> str:
    """A heading's text without its markup (`**bold**` → `bold`)."""
    parts = [
        child.content if child.type in ("text", "code_inline") else " "
        for child in token.children or []
        if child.type in ("text", "code_inline", "softbreak")
    ]
    return " ".join("".join(parts).split())
