"""A PDF's text as `parse()` reads it, against pdftotext and against the words the PDF draws. Run with
`make bench-pdf-text` (it installs Debian's poppler-utils for pdftotext when missing).

The PDFs are typeset books made by `tests.files.book_pdf` from the first RECORDS records of three BEIR
corpora under ../shared/eval (scientific and medical abstracts, Wikipedia sentences; ten records a
chapter, each a title and its text): 80-character lines with long words broken by a hyphen at
the line end, 44 lines a page, "fi" and "fl" drawn as ligature glyphs mapped to U+FB01 and U+FB02, a
running header on every page but a chapter's first ("Chapter N: Name" and the page number, or the number
and the book's title) and "Page n of m" at the foot.

For each book, three texts: pypdf's text of each page as it comes (`before`, what parse() gave without
normalisation), `parse()`'s (`after`) and pdftotext's. Printed for each: words; agreement with
pdftotext (F1 of the two multisets of words, both NFKC- and case-folded), with all of its text and with
its body (less the lines that are page furniture); recall and precision against
the words the book draws in its body (`truth`: headings and prose, unbroken); ligature characters left;
lines of page furniture left; words still broken at a line end.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import shutil
import subprocess
import tempfile
import unicodedata
from collections import Counter
from pathlib import Path

from retrieval_core.parsers import parse
from tests.files import book_pdf

REPO = Path(__file__).resolve().parents[1]
# The BEIR folders under ../shared/eval whose first records make the books.
SHARED = REPO.parent / "shared" / "eval"
BOOKS = ("scifact", "nfcorpus", "climate-fever-evidence")
RECORDS = 80
CHAPTER_RECORDS = 10
WIDTH = 80
LINES_PER_PAGE = 44
TITLE = "Collected Abstracts"
_FURNITURE = re.compile(rf"(Chapter \d+: .*|\d+ {TITLE}|Page \d+ of \d+|\d+)")
_BROKEN = re.compile(r"[a-z]-\n[a-z]")
_LIGATURES = re.compile("[\ufb00-\ufb06]")


def records(corpus: str) -> list[tuple[str, str]]:
    """(title, text) of the corpus's first RECORDS records, ASCII words only."""
    found = []
    with (SHARED / corpus / "corpus.jsonl").open() as lines:
        for line in lines:
            record = json.loads(line)
            found.append((_ascii(record.get("title") or ""), _ascii(record["text"])))
            if len(found) == RECORDS:
                break
    return found


def _ascii(text: str) -> str:
    return " ".join(word for word in text.split() if word.isascii())


def typeset(paragraphs: list[str]) -> list[str]:
    """Lines of at most WIDTH characters, a long word broken by a hyphen at a line end, paragraphs apart."""
    lines: list[str] = []
    for paragraph in paragraphs:
        line = ""
        words = paragraph.split()
        while words:
            word = words.pop(0)
            room = WIDTH - len(line) - 1
            if len(line) + 1 + len(word) <= WIDTH or not line:
                line = f"{line} {word}".strip()
                continue
            if word.isalpha() and word.islower() and len(word) >= 8 and room >= 4:
                cut = min(room - 1, len(word) - 3)
                lines.append(f"{line} {word[:cut]}-")
                line = word[cut:]
            else:
                lines.append(line)
                line = word
        lines += [line, ""]
    return lines


def book(corpus: str) -> tuple[bytes, str]:
    """The book typeset from a corpus's records, CHAPTER_RECORDS a chapter (named after its first
    record's title, each record a titled paragraph), and the text its body draws (chapter headings,
    titles and prose, unbroken)."""
    chapters, truth = [], []
    found = records(corpus)
    for number, first in enumerate(range(0, len(found), CHAPTER_RECORDS), start=1):
        part = found[first : first + CHAPTER_RECORDS]
        name = " ".join(part[0][0].split()[:5]) or f"Part {number}"
        paragraphs = [text for record in part for text in record if text]
        lines = typeset(paragraphs)
        pages = ["\n".join(lines[i : i + LINES_PER_PAGE]) for i in range(0, len(lines), LINES_PER_PAGE)]
        chapters.append((name, pages))
        truth += [f"{number} {name}", *paragraphs]
    return book_pdf(chapters, TITLE), "\n".join(truth)


def words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text))


def folded(text: str) -> Counter[str]:
    return words(unicodedata.normalize("NFKC", text).casefold())


def f1(found: Counter[str], reference: Counter[str]) -> float:
    common = sum((found & reference).values())
    return 2 * common / (sum(found.values()) + sum(reference.values()))


def _furniture(line: str) -> bool:
    return _FURNITURE.fullmatch(line.strip()) is not None


def pdftotext(data: bytes) -> str:
    if shutil.which("pdftotext") is None:
        raise SystemExit("pdftotext is missing: `make bench-pdf-text` installs poppler-utils")
    with tempfile.NamedTemporaryFile(suffix=".pdf") as file:
        file.write(data)
        file.flush()
        return subprocess.run(
            ["pdftotext", "-enc", "UTF-8", file.name, "-"], check=True, capture_output=True, text=True
        ).stdout


def measure(name: str, data: bytes, truth: str) -> None:
    from pypdf import PdfReader

    pages = PdfReader(io.BytesIO(data)).pages
    texts = {
        "before": "\n\n".join(page.extract_text() for page in pages),
        "after": parse(data, "application/pdf").documents[0].text,
        "pdftotext": pdftotext(data),
    }
    reference, truth_words = folded(texts["pdftotext"]), words(truth)
    body = folded("\n".join(line for line in texts["pdftotext"].splitlines() if not _furniture(line)))
    print(f"\n{name}: {len(pages)} pages, {sum(truth_words.values()):,} words drawn in the body")
    print(f"{'text':10} {'words':>7} {'F1 pdftotext':>13} {'F1 its body':>11} {'recall':>7} {'precision':>9} "
          f"{'ligatures':>9} {'furniture':>9} {'broken':>6}")  # fmt: skip
    for label, text in texts.items():
        found = words(text)
        common = sum((found & truth_words).values())
        furniture = sum(1 for line in text.splitlines() if _furniture(line))
        print(
            f"{label:10} {sum(found.values()):>7,} {f1(folded(text), reference):>13.4f} "
            f"{f1(folded(text), body):>11.4f} "
            f"{common / sum(truth_words.values()):>7.4f} {common / sum(found.values()):>9.4f} "
            f"{len(_LIGATURES.findall(text)):>9,} {furniture:>9,} {len(_BROKEN.findall(text)):>6,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("books", nargs="*", default=BOOKS, help="folders under ../shared/eval to typeset")
    args = parser.parse_args()
    version = subprocess.run(["pdftotext", "-v"], capture_output=True, text=True).stderr.split("\n")[0]
    print(f"pypdf + parse() against {version}")
    for corpus in args.books:
        data, truth = book(corpus)
        measure(corpus, data, truth)


if __name__ == "__main__":
    main()
