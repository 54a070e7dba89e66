"""The text a hybrid search sends to PostgreSQL's full-text side, bounded before it leaves Python.

Pure: no database client. The query is read as `websearch_to_tsquery` reads it: words, "quoted
phrases", `-word` / `-"phrase"` exclusions, and `or` between terms. Two things are bounded here:

- The number of terms. Each term costs a tsquery node that every candidate chunk is tested against,
  and the keyword side's cost grows with them (a query of 1,600 exclusions ran into the 15 s statement
  timeout on a store of 5,000 passages). MAX_KEYWORD_TERMS keeps the first 64 terms: the longest
  query in our three dev sets has 29 words (scifact; msmarco's longest 9, nfcorpus's 11), so real
  questions keep every word, and a pasted paragraph keeps its first 64.
- A query with no positive term (only `-word` exclusions, or only punctuation) can match nothing
  but everything-except: it is not sent at all, and hybrid fuses the vector list with an empty
  keyword list. Stopwords depend on the store's text search configuration, so a query of stopwords
  only is caught in SQL, with the store lookup (search_sql.find_store_with_lexemes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

MAX_KEYWORD_TERMS = 64
CUT_PREFIX = "the keyword search used the first"
NO_KEYWORD_TERM = (
    "the query has no word to search for by keyword (only exclusions, stopwords or punctuation): the "
    "keyword list is empty, so the results are the vector search's"
)
NO_KEYWORD_TO_SEARCH = (
    "the query has no word to search for by keyword (only exclusions, stopwords or punctuation): a "
    "keyword search finds nothing"
)

# A quoted phrase (an unclosed quote runs to the end, as in websearch_to_tsquery), else a run of
# non-space characters; either may carry a leading '-'.
_TOKEN = re.compile(r'-?"[^"]*"?|\S+')


@dataclass(frozen=True)
class KeywordQuery:
    """What the keyword side searches for: `text` (None: nothing), its term count, why it changed."""

    text: str | None
    terms: int = 0
    warning: str | None = None

    @property
    def positive_text(self) -> str:
        """The positive terms only, for checking that at least one has a lexeme."""
        if self.text is None:
            return ""
        return " ".join(t for t in _TOKEN.findall(self.text) if not _is_negation(t) and not _is_or(t))


def _is_or(token: str) -> bool:
    return token.lower() == "or"


def _is_negation(token: str) -> bool:
    return token.startswith("-") and len(token) > 1


def _has_word(token: str) -> bool:
    return any(ch.isalnum() for ch in token)


def normalise_keyword_query(query: str, max_terms: int = MAX_KEYWORD_TERMS) -> KeywordQuery:
    """The first `max_terms` terms of `query` (operators kept between them); None when none is positive."""
    kept: list[str] = []
    terms = 0
    positive = 0
    dropped = 0
    for token in _TOKEN.findall(query):
        if _is_or(token):
            kept.append(token)
            continue
        if not _has_word(token):
            continue  # punctuation alone: websearch_to_tsquery reads no term from it
        if terms == max_terms:
            dropped += 1
            continue
        terms += 1
        positive += not _is_negation(token)
        kept.append(token)
    if positive == 0:
        return KeywordQuery(None, 0, NO_KEYWORD_TERM)
    while kept and _is_or(kept[-1]):
        kept.pop()
    warning = (
        f"{CUT_PREFIX} {max_terms} terms of the query ({dropped} more were left out)" if dropped else None
    )
    return KeywordQuery(" ".join(kept), terms, warning)


def keyword_query_for(query: str, search_mode: str) -> KeywordQuery:
    """What a search of `search_mode` sends to the keyword side: nothing in vector mode; a query with no
    positive term carries the note of what the mode then returns."""
    if search_mode == "vector":
        return KeywordQuery(None)
    keyword = normalise_keyword_query(query)
    if keyword.text is None:
        return replace(keyword, warning=no_keyword_note(search_mode == "keyword"))
    return keyword


def is_keyword_note(warning: str) -> bool:
    """Whether `warning` only says how the keyword query was bounded (the same every time, not a failure)."""
    return warning in (NO_KEYWORD_TERM, NO_KEYWORD_TO_SEARCH) or warning.startswith(CUT_PREFIX)


def no_keyword_note(keyword_only: bool) -> str:
    """The note of a query with no word to search for: a hybrid search is then the vector search's."""
    return NO_KEYWORD_TO_SEARCH if keyword_only else NO_KEYWORD_TERM
