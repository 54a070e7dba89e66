"""The words of returned chunks that a keyword query matches, as they are written, found by PostgreSQL.

`ts_headline` with HighlightAll marks every word of a text whose lexeme (in the store's text search
configuration) is in the query, the same parsing and stemming as the keyword index: "Refunds" and
"refunded" for a query "refund". The marks are two private-use characters, taken out of the text first
so a chunk cannot forge one; the marked words are read back with a regular expression, distinct, in the
order they first occur. One statement for every chunk of an answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from retrieval_core.db.connection import Connection
from retrieval_core.db.keyword_sql import keyword_tsquery

MARK_START = "\ue000"
MARK_END = "\ue001"

_MATCHED_TERMS = sql.SQL("""SELECT coalesce((
           SELECT array_agg(word ORDER BY first_seen)
           FROM (SELECT m[1] AS word, min(n) AS first_seen
                 FROM regexp_matches(
                     ts_headline(%(text_search)s::regconfig, translate(c.content, %(marks)s, '  '), kq.q,
                                 %(options)s),
                     %(pattern)s, 'g') WITH ORDINALITY AS r(m, n)
                 GROUP BY 1) AS words), '{{}}')
       FROM unnest(%(contents)s::text[]) WITH ORDINALITY AS c(content, i),
            (SELECT {tsquery} AS q) AS kq
       ORDER BY c.i""").format(tsquery=sql.SQL(keyword_tsquery("%(text_search)s::regconfig")))
_OPTIONS = f"HighlightAll=true, StartSel={MARK_START}, StopSel={MARK_END}"
_PATTERN = f"{MARK_START}([^{MARK_END}]*){MARK_END}"


def matched_terms(
    conn: Connection, text_search: str, query_text: str, contents: Sequence[str]
) -> list[list[str]]:
    """For each of `contents`, the distinct words `query_text`'s keyword query matches, in first-seen order.

    `query_text` holds the positive terms only: a `-word` exclusion is in the keyword query but matches
    nothing a result holds. A phrase's words are marked wherever they occur.
    """
    if not contents:
        return []
    rows = conn.execute(
        _MATCHED_TERMS,
        {
            "text_search": text_search,
            "query_text": query_text,
            "contents": list(contents),
            "marks": MARK_START + MARK_END,
            "options": _OPTIONS,
            "pattern": _PATTERN,
        },
    ).fetchall()
    return [list(row[0]) for row in rows]
