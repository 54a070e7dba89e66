"""The one text normalisation every parser's output goes through (`parse()` applies it). Pure: no I/O.

On each block's text, in order:
1. Unicode NFKC: ligatures become their letters ("ﬁ" -> "fi"), full-width forms ASCII ("ｐｒｏｆｉｌｅ" ->
   "profile"), other compatibility characters their plain form ("²" -> "2", "…" -> "...", no-break and
   other spaces a space).
2. Line ends: CR and CRLF, line and paragraph separators, vertical tab and form feed become `\\n`
   (a paragraph separator or form feed a blank line).
3. De-hyphenation of a word broken across a line end (`dehyphenate`), and across the end of one block
   (a page) and the start of the next: the word is joined in the first.
4. Invisible characters go: NUL (PostgreSQL text cannot hold it), soft hyphen, zero-width space, a BOM
   inside the text. Zero-width (non-)joiners stay: they change how scripts and emoji read.
5. Whitespace: a run of spaces and tabs inside a line becomes one space, trailing spaces go, a line of
   only whitespace becomes empty, and three or more line breaks become one blank line (the paragraph
   break the chunker cuts at). Leading indentation stays (code in Markdown and `<pre>`).

Titles and section paths get steps 1, 2 and 4 and become one line with single spaces.
"""

from __future__ import annotations

import itertools
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from retrieval_core.parsers.base import Block, ParsedDocument

_LINE_ENDS = str.maketrans(
    {"\r": "\n", "\u2028": "\n", "\x0b": "\n", "\x85": "\n", "\u2029": "\n\n", "\x0c": "\n\n"}
)
_INVISIBLE = str.maketrans(dict.fromkeys("\x00\u00ad\u200b\ufeff"))
# Invisible characters but a soft hyphen at a line end, which de-hyphenation reads first.
_INVISIBLE_INSIDE = re.compile("[\x00\u200b\ufeff]|\u00ad(?![ \t]*\n)")

# Possessive, and each pattern starts only where a word starts: linear however long a word is.
_LETTERS = r"[^\W\d_]++"
_HYPHEN = r"\-\u2010"
# A word (optionally the last part of a hyphenated compound) ending a line with a hyphen (or a soft
# hyphen), and the letters that begin the next line.
_BROKEN_WORD = rf"(?<![\w{_HYPHEN}])((?:{_LETTERS}[{_HYPHEN}])*)({_LETTERS})([{_HYPHEN}\u00ad])"
_BREAK = re.compile(rf"{_BROKEN_WORD}[ \t]*\n[ \t]*({_LETTERS})")
# The same break between two blocks: the end of a page and the start of the next.
_BLOCK_END = re.compile(rf"{_BROKEN_WORD}\s*\Z")
_BLOCK_START = re.compile(rf"\s*({_LETTERS})")
_WORD = re.compile(_LETTERS)
_COMPOUND = re.compile(rf"(?<![^\W\d_]){_LETTERS}(?:[{_HYPHEN}]{_LETTERS})+")
# First and last words that make a hyphenated compound rather than a broken word ("self-contained",
# "well-known", "non-negative", "user-defined", "thread-aware").
COMPOUND_FIRST = frozenset({"self", "well", "non", "half", "all", "ex", "cross", "so", "quasi"})
COMPOUND_LAST = frozenset(
    {
        "based",
        "specific",
        "oriented",
        "defined",
        "related",
        "driven",
        "aware",
        "friendly",
        "dependent",
        "independent",
        "compatible",
        "sensitive",
    }
)
# Hyphenators leave at least two letters before the break and three after it (TeX's English
# lefthyphenmin and righthyphenmin): a shorter half is the half of a compound ("e-mail", "built-in").
_MIN_BEFORE, _MIN_AFTER = 2, 3

_SPACE_RUN = re.compile(r"(?<=\S)[ \t]++(?=\S)")
_BLANK_LINES = re.compile(r"\n{3,}")


def _no_check() -> None:
    """No checkpoint: a document normalised outside `parse()`."""


def normalize_document(
    document: ParsedDocument, checkpoint: Callable[[], None] = _no_check
) -> ParsedDocument:
    """`document` with its blocks' text, its title and its section paths normalised; blocks left
    without text are dropped. `checkpoint` is called before each block's last pass (the parse budget's
    deadline)."""
    texts = [_characters(block.text) for block in document.blocks]
    vocabulary = Vocabulary(texts)
    _join_across_blocks(texts, vocabulary)
    blocks = []
    for text, block in zip(texts, document.blocks, strict=True):
        checkpoint()
        normalized, metadata = _whitespace(dehyphenate(text, vocabulary)), _metadata(block.metadata)
        if normalized:
            unchanged = normalized == block.text and metadata is block.metadata
            blocks.append(block if unchanged else Block(normalized, metadata))
    title = normalize_line(document.title)
    if title == document.title and blocks == document.blocks:
        return document
    return ParsedDocument(
        blocks,
        title,
        document.metadata,
        document.record_id,
        document.record_number,
    )


def normalize_text(text: str) -> str:
    """One text on its own, normalised as a block is (its own words decide de-hyphenation)."""
    characters = _characters(text)
    return _whitespace(dehyphenate(characters, Vocabulary([characters])))


def normalize_line(text: str) -> str:
    """A title or heading: NFKC, invisible characters removed, on one line with single spaces."""
    return " ".join(_characters(text).translate(_INVISIBLE).split()) if text else ""


class Vocabulary:
    """The words of a document (case-folded) and its hyphenated compounds, to decide de-hyphenation.

    Read from the texts on the first question: most documents (a CSV's short records) have no broken
    word to ask about."""

    def __init__(self, texts: Iterable[str]) -> None:
        self._texts: Iterable[str] | None = texts
        self.words: set[str] = set()
        self.compounds: set[str] = set()

    def _read(self) -> None:
        for text in self._texts or ():
            folded = text.casefold()
            self.words.update(_WORD.findall(folded))
            for compound in _COMPOUND.findall(folded):
                parts = re.split(f"[{_HYPHEN}]", compound)
                self.compounds.update(f"{a}-{b}" for a, b in itertools.pairwise(parts))
        self._texts = None

    def keeps_hyphen(self, before: str, after: str) -> bool:
        """Whether `before`-`after`, broken at a line end, is a hyphenated compound (else one word).

        In order: the joined word elsewhere in the document -> one word; the hyphenated form elsewhere
        -> a compound; a half shorter than hyphenators leave, or a known compound word on either side
        -> a compound; otherwise one word."""
        if self._texts is not None:
            self._read()
        first, last = before.casefold(), after.casefold()
        if first + last in self.words:
            return False
        if f"{first}-{last}" in self.compounds:
            return True
        return (
            len(first) < _MIN_BEFORE
            or len(last) < _MIN_AFTER
            or first in COMPOUND_FIRST
            or last in COMPOUND_LAST
        )


def dehyphenate(text: str, vocabulary: Vocabulary) -> str:
    """Words broken across a line end by a hyphen joined again: "environ-\\nment" -> "environment",
    "well-\\nknown" -> "well-known" (the line end goes either way).

    Only when the next line begins with a lowercase letter ("Anglo-\\nSaxon", "COVID-\\n19" stay as
    they are). A soft hyphen (U+00AD) is a break by definition; the last part of a hyphenated compound
    ("state-of-the-\\nart") keeps its hyphen; else `Vocabulary.keeps_hyphen` decides."""

    def join(match: re.Match[str]) -> str:
        compound, before, hyphen, after = match.groups()
        return _rejoined(compound, before, hyphen, after, vocabulary) or match.group(0)

    return _BREAK.sub(join, text) if "\n" in text else text


def _join_across_blocks(texts: list[str], vocabulary: Vocabulary) -> None:
    """A word broken at the end of one block (a page) and ended at the start of the next is joined in
    the first: the rules of `dehyphenate`."""
    for index in range(len(texts) - 1):
        end, start = _BLOCK_END.search(texts[index]), _BLOCK_START.match(texts[index + 1])
        if end is None or start is None:
            continue
        compound, before, hyphen = end.groups()
        word = _rejoined(compound, before, hyphen, start.group(1), vocabulary)
        if word is not None:
            texts[index] = texts[index][: end.start()] + word
            texts[index + 1] = texts[index + 1][start.end() :]


def _rejoined(compound: str, before: str, hyphen: str, after: str, vocabulary: Vocabulary) -> str | None:
    """The word `compound` `before` `hyphen` | `after` makes again, or None when it is not a break."""
    if not after[0].islower():
        return None
    if hyphen != "\u00ad" and (compound or vocabulary.keeps_hyphen(before, after)):
        return f"{compound}{before}-{after}"
    return f"{compound}{before}{after}"


def _characters(text: str) -> str:
    # ASCII is its own NFKC and holds none of the invisible characters but NUL: the common case, fast.
    text = text.replace("\r\n", "\n").translate(_LINE_ENDS)
    if text.isascii():
        return text.replace("\x00", "")
    return _INVISIBLE_INSIDE.sub("", unicodedata.normalize("NFKC", text))


def _whitespace(text: str) -> str:
    if not text.isascii():
        text = text.translate(_INVISIBLE)
    if "  " in text or "\t" in text:
        text = _SPACE_RUN.sub(" ", text)
    if "\n" not in text:
        return text.strip()
    text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return _BLANK_LINES.sub("\n\n", text).strip()


def _metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    section = metadata.get("section")
    if not isinstance(section, str):
        return metadata
    return {**metadata, "section": normalize_line(section)}
