"""Judgments of where an answer sits inside long documents, and whether a chunk or a context holds it.

Two kinds of judgment (../shared/eval-long/README.md, docs/quality.md "Long documents"):

- a **span**: `{"qid", "document", "start", "end", "answer"}`, the answer's text at character offsets of
  one document. A chunk or a context holds it when its text contains the answer, whitespace collapsed.
- a **section**: `{"qid", "documents", "context", "answer"}`, the section a question was made from (in
  any of several documents) and a reference answer. A chunk holds it when it comes from one of those
  documents and shares a run of at least 12 consecutive words with the section (words lower-cased,
  punctuation and Markdown marks dropped); a context holds it when it has at least 80% of the reference
  answer's content words.

Pure: no I/O beyond reading the judgments file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SHARED_RUN_WORDS = 12
ANSWER_WORDS_SHARE = 0.8
_WORD = re.compile(r"[a-z0-9]+")
# Function words left out of "content words": English articles, pronouns, auxiliaries, prepositions.
_STOPWORD_TEXT = (
    "a an the and or but if then else of to in on at by for with from as into onto over under about "
    "is are was were be been being am do does did done have has had having it its this that these those "
    "there here which who whom whose what when where why how not no nor so than too very can could will "
    "would shall should may might must i you he she we they me him her us them my your his our their "
    "also such any each all both either neither more most other some only own same just"
)
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True, slots=True)
class Evidence:
    """One question's judgment: the documents that hold its answer, and what counts as holding it."""

    query_id: str
    documents: tuple[str, ...]
    answer: str
    section: str | None = None  # a section judgment's text; None for a span judgment
    span: tuple[int, int] | None = None  # a span judgment's offsets into its document


def words(text: str) -> list[str]:
    """`text` as lower-cased words, punctuation and Markdown marks dropped."""
    return _WORD.findall(text.lower())


def collapsed(text: str) -> str:
    """`text` with every run of whitespace one space, and none at either end."""
    return " ".join(text.split())


def read_judgments(path: Path) -> dict[str, Evidence]:
    """query id -> its evidence, from a judgments.jsonl of span or section lines."""
    judged: dict[str, Evidence] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        try:
            judged[str(record["qid"])] = evidence_of(record)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{path}: line {number}: not a span or section judgment ({exc})") from None
    return judged


def evidence_of(record: dict[str, object]) -> Evidence:
    """A span judgment (`document`, `start`, `end`, `answer`) or a section one (`documents`, `context`,
    `answer`)."""
    answer = str(record["answer"])
    if "document" in record:
        start, end = int(str(record["start"])), int(str(record["end"]))
        return Evidence(str(record["qid"]), (str(record["document"]),), answer, span=(start, end))
    documents = record["documents"]
    if not isinstance(documents, list) or not documents:
        raise ValueError("documents must be a non-empty list")
    return Evidence(str(record["qid"]), tuple(map(str, documents)), answer, section=str(record["context"]))


class Matcher:
    """Whether a chunk, or a packed context, holds one question's evidence (precomputed once)."""

    def __init__(self, evidence: Evidence) -> None:
        self.evidence = evidence
        self._answer = collapsed(evidence.answer)
        self._runs: frozenset[tuple[str, ...]] = frozenset()
        self._content: frozenset[str] = frozenset()
        if evidence.section is not None:
            self._runs = frozenset(runs(words(evidence.section), SHARED_RUN_WORDS))
            self._content = frozenset(w for w in words(evidence.answer) if w not in STOPWORDS)

    def chunk_holds(self, document_id: str, text: str) -> bool:
        """The chunk `text` of document `document_id` holds the evidence."""
        if self.evidence.section is None:
            return bool(self._answer) and self._answer in collapsed(text)
        if document_id not in self.evidence.documents:
            return False
        return any(run in self._runs for run in runs(words(text), SHARED_RUN_WORDS))

    def context_holds(self, context: str) -> bool:
        """The packed `context` (the prompt a model would get) holds the evidence."""
        if self.evidence.section is None:
            return bool(self._answer) and self._answer in collapsed(context)
        if not self._content:
            return False
        present = set(words(context))
        return len(self._content & present) >= ANSWER_WORDS_SHARE * len(self._content)


def runs(sequence: Sequence[str], n: int) -> Iterable[tuple[str, ...]]:
    """Every run of `n` consecutive items of `sequence`."""
    return (tuple(sequence[i : i + n]) for i in range(len(sequence) - n + 1))


def first_hit(matcher: Matcher, chunks: Sequence[tuple[str, str]]) -> int | None:
    """The 1-based rank of the first of `chunks` ((document id, text), best first) that holds the
    evidence; None when none does."""
    for rank, (document_id, text) in enumerate(chunks, start=1):
        if matcher.chunk_holds(document_id, text):
            return rank
    return None
