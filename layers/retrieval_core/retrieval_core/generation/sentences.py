"""The sentences of a source, for the extractive generator (extractive.py). Pure.

A source is the citation header line (`Source: <document>...`, search/context_packing.py
`citation_header`), a line break, and a chunk's text. The header is never a sentence. The text is read
line by line first, because chunks keep their documents' lines:

- A blank line ends a paragraph. A line that does not end a sentence runs on into the next one (text
  wrapped at a page's width), unless it stands alone as a title.
- Markdown headings (`# Install`, or a line underlined with `===` / `---`) and titles (a line of at most
  TITLE_MAX_WORDS words with no full stop, no colon and no list marker, before a blank line or a line
  that starts a new sentence) are left out: they name a topic, so they resemble questions about it,
  but state nothing.
- A list item (`- `, `* `, `• `, `1. `, `a) `) is a sentence of its own, without its marker, even with
  no full stop; so is a table row (cells between `|`) and its wrapped lines.

Paragraphs are then cut after `.`, `!`, `?` or `...` (and closing quotes or brackets) followed by
a space and a word that does not start in lowercase, except after an abbreviation (`e.g.`, `Dr.`:
ABBREVIATIONS; `Fig.` or `p.` before a number: NUMBERED_ABBREVIATIONS), an initial (`J. Smith`) or
a dotted acronym (`U.S.`); after the CJK full stop, exclamation and question marks, with no space;
after `.`, `!`, `?` directly before a CJK character; and where a full stop lacks its space between
two words (`blue.The`). A sentence longer than MAX_SENTENCE_CHARS is cut into pieces of at most that
length, after a `;`, `,` or dash when one lies in the second half, else at a space, else anywhere
(text without spaces). Pieces with fewer than MIN_WORDS words are left out. Bracketed numbers in the
text (`[12]`, a document's footnote references) are removed: in an answer they would read as
citations of the answer's sources (citations.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from retrieval_core.generation.citations import MARKERS

# How search/context_packing.py `citation_header` begins every source the answer service builds.
HEADER_PREFIX = "Source: "
# A sentence longer than this is cut into pieces: an answer quotes sentences, not whole pages of text
# that a parser read as one (a flattened list, a table without line breaks).
MAX_SENTENCE_CHARS = 400
# A line of at most this many words with no full stop and no colon, standing alone, is a title.
TITLE_MAX_WORDS = 8
# Fewer words than this ("Yes.", "Figure 3", a page number) answer nothing.
MIN_WORDS = 3

# Words whose full stop ends no sentence, whatever follows (lowercased, without the final full stop).
_ALWAYS = (
    "mr mrs ms dr prof sr jr st mt rev gen col lt sgt capt gov sen rep "
    "e.g i.e vs cf al approx ca inc ltd corp dept z.b bzw"
)
ABBREVIATIONS = frozenset(_ALWAYS.split())
# Words whose full stop ends no sentence when a number follows ("Fig. 3", "p. 12"; "say no. Then" ends).
_BEFORE_NUMBERS = (
    "no nos nr fig figs eq eqs vol vols p pp ch sect art jan feb mar apr jun jul aug sep sept oct nov dec"
)
NUMBERED_ABBREVIATIONS = frozenset(_BEFORE_NUMBERS.split())

_ATX_HEADING = re.compile(r"#{1,6}(?:\s|$)")
_UNDERLINE = re.compile(r"(?:=+|-+|\*+|_+)")
_LIST_MARKER = re.compile(r"(?:[-*+•‣◦▪●–]|\d{1,3}[.)]|[a-z]\))\s+")
_TABLE_DIVIDER = re.compile(r"[|:\-\s]+")
_CLOSERS = "\"'”’)]」』"
_CLOSER = f"[{re.escape(_CLOSERS)}]"
# A boundary: western punctuation and closers, then spaces (the next word is checked in code); CJK stops
# with no space needed; western punctuation right before a CJK character; a full stop between two words.
# A run of punctuation is matched from its first character only, and never given back (possessive): a
# line of 20,000 dots is read once, not once per dot.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_BOUNDARY = re.compile(
    rf"(?<![.!?…])(?P<western>[.!?…]++{_CLOSER}*+)(?=\s+\S)"
    rf"|(?P<cjk>[。！？｡]+{_CLOSER}*)"
    rf"|(?<![.!?])(?P<before_cjk>[.!?]++)(?=[{_CJK}])"
    r"|(?<=[a-z]{2})(?P<glued>[.!?])(?=[A-Z][a-z])"
)
# A word: a run of letters or digits outside CJK scripts, or one CJK character (they are written without
# spaces).
_WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_NEXT_CHARACTER = re.compile(r"\s+(\S)")
_LAST_WORD = re.compile(r"\S+$")
# Characters before a full stop that can hold an abbreviation, an initial or a dotted acronym with
# its opening bracket; only these are read.
_LONGEST_ABBREVIATION = 16
_INITIAL = re.compile(r"[A-Za-z]\.")
_DOTTED = re.compile(r"(?:[A-Za-z]\.){2,}")
_SENTENCE_MARKS = frozenset(".!?…。！？｡")
# A line ending in these is a wrapped sentence, not a title.
_CLAUSE_ENDINGS = (",", ";", "-", "–", "—", "(")
_RUN_ON = "a an the of to in on by for and or with from at as is are was were that"
_RUN_ON_WORDS = frozenset(_RUN_ON.split())
_CUT_AFTER = re.compile(r"[;,]\s|\s[–—-]\s")


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of source number `source` (1-based), the `position`-th one kept from it."""

    source: int
    position: int
    text: str


def candidates(sources: Sequence[str], limit: int) -> list[Sentence]:
    """The sentences of `sources` in order, each text once (the first time it occurs), at most `limit`."""
    chosen: list[Sentence] = []
    seen: set[str] = set()
    for number, source in enumerate(sources, start=1):
        position = 0
        for text in split_sentences(source_text(source)):
            key = " ".join(text.split()).casefold()
            if key in seen:
                continue
            seen.add(key)
            chosen.append(Sentence(number, position, text))
            position += 1
            if len(chosen) >= limit:
                return chosen
    return chosen


def source_text(source: str) -> str:
    """A source without its citation header line."""
    if source.startswith(HEADER_PREFIX):
        _, _, rest = source.partition("\n")
        return rest
    return source


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, in order, each on one line with single spaces."""
    sentences: list[str] = []
    for unit in _units(text):
        for sentence in _split_unit(MARKERS.sub("", unit)):
            for piece in _cut_long(sentence):
                if word_count(piece) >= MIN_WORDS:
                    sentences.append(piece)
    return sentences


def word_count(text: str) -> int:
    """Words of `text`, counting each CJK character as one."""
    return len(_WORD.findall(text))


def ends_sentence(text: str) -> bool:
    """Whether `text` ends with a sentence's final punctuation (closing quotes or brackets after it)."""
    return text.rstrip(_CLOSERS)[-1:] in _SENTENCE_MARKS


class _Paragraph:
    """Lines that read as one run of text, and whether it is text, a list item or a table row."""

    def __init__(self, line: str, kind: str) -> None:
        self.lines = [line]
        self.kind = kind  # "text", "item" or "row"

    def text(self) -> str:
        return " ".join(" ".join(self.lines).split())


def _units(text: str) -> Iterator[str]:
    # Runs of text to split into sentences: paragraphs, list items and table rows; headings and titles
    # left out.
    lines = [raw.strip() for raw in text.splitlines()]
    pending: _Paragraph | None = None
    for index, line in enumerate(lines):
        if not line or _ATX_HEADING.match(line) or (_UNDERLINE.fullmatch(line) and len(line) >= 2):
            # A line underlining a one-line paragraph makes it a (setext) heading.
            if pending and not (_UNDERLINE.fullmatch(line) and len(pending.lines) == 1):
                yield pending.text()
            pending = None
            continue
        kind = "text"
        if "|" in line:
            if _TABLE_DIVIDER.fullmatch(line):
                continue
            line, kind = line.strip("|").strip(), "row"
        elif marker := _LIST_MARKER.match(line):
            line, kind = line[marker.end() :], "item"
        if pending is not None and _runs_on(pending, line, kind):
            pending.lines.append(line)
            continue
        if pending:
            yield pending.text()
        following = lines[index + 1] if index + 1 < len(lines) else ""
        pending = None if kind == "text" and _is_title(line, following) else _Paragraph(line, kind)
    if pending:
        yield pending.text()


def _runs_on(pending: _Paragraph, line: str, kind: str) -> bool:
    # Text wrapped at a width: the line above ends mid-sentence, or this one starts in lowercase. A list
    # item's or a table row's wrapped lines start in lowercase.
    if kind != "text":
        return False
    starts_lower = line[0].islower()
    if pending.kind != "text":
        return starts_lower and not ends_sentence(pending.lines[-1])
    return starts_lower or not ends_sentence(pending.lines[-1])


def _is_title(line: str, following: str) -> bool:
    # A short line that starts a run of text (the line above ended a sentence, or there is none), does
    # not run on into the next one, and does not stop where a wrapped sentence does (narrow columns).
    last_word = line.rsplit(maxsplit=1)[-1]
    return (
        word_count(line) <= TITLE_MAX_WORDS
        and ":" not in line
        and not ends_sentence(line)
        and not following[:1].islower()
        and not line.endswith(_CLAUSE_ENDINGS)
        and last_word not in _RUN_ON_WORDS
    )


def _split_unit(unit: str) -> Iterator[str]:
    start = 0
    for match in _BOUNDARY.finditer(unit):
        end = match.end()
        if match.lastgroup == "western" and not _ends_here(unit, match):
            continue
        sentence = unit[start:end].strip()
        if sentence:
            yield sentence
        start = end
    rest = unit[start:].strip()
    if rest:
        yield rest


def _ends_here(unit: str, match: re.Match[str]) -> bool:
    # After western punctuation and a space: a sentence ends unless the next word starts in lowercase or
    # the word before a lone full stop is an abbreviation, an initial or a dotted acronym.
    following = _NEXT_CHARACTER.match(unit, match.end())
    next_character = following.group(1) if following else ""
    if next_character.islower():
        return False
    if match.group().rstrip(_CLOSERS) != ".":
        return True
    before = _LAST_WORD.search(unit, max(0, match.start() - _LONGEST_ABBREVIATION), match.start() + 1)
    word = before.group().lstrip("([\"'“‘") if before else ""
    stem = word[:-1].casefold()
    if stem in NUMBERED_ABBREVIATIONS and next_character.isdigit():
        return False
    return not (stem in ABBREVIATIONS or _INITIAL.fullmatch(word) or _DOTTED.fullmatch(word))


def _cut_long(sentence: str) -> Iterator[str]:
    rest = sentence
    while len(rest) > MAX_SENTENCE_CHARS:
        window = rest[: MAX_SENTENCE_CHARS + 1]
        half = MAX_SENTENCE_CHARS // 2
        cut = max((m.end() for m in _CUT_AFTER.finditer(window, half)), default=-1)
        if cut == -1:
            cut = window.rfind(" ", half)
        if cut <= 0:
            cut = MAX_SENTENCE_CHARS
        yield rest[:cut].strip()
        rest = rest[cut:].strip()
    if rest:
        yield rest
