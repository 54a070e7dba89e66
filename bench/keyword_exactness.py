"""The pruned BM25 keyword search against a full ranking, on the stores `make eval-all` loads.

    python -m bench.keyword_exactness [--queries 1000] [--store NAME] [--save FILE | --compare FILE]

For every query of every set under ../shared/eval and limits 10, 20 and 100, the keyword search the
service runs (the store's function unfiltered, the inline statement filtered to every third document)
must return exactly the first rows of the full ranking: every chunk matching the query, scored by the
same arithmetic, ordered by score, document id and chunk index. Rows, scores (bit for bit) and order
are compared. `--store` checks that store (e.g. bench/keyword_scale.py's) with every set's queries
instead of each set's own store, unfiltered only (a filter of a third of a large store's documents
is an id list checked per candidate, which outlasts the statement timeout). `--save` writes
the answers to a JSON file and `--compare` checks them against one saved before a change. Exits
non-zero on any difference.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.common import REPO

EVAL = REPO.parent / "shared" / "eval"
LIMITS = (10, 20, 100)
# Filtered searches: this many queries per set (each at every limit), filtered to every third document.
FILTERED_QUERIES = 50

# Every chunk matching the query, scored as the search scores it (the same query weights and inner
# product), in the search's order.
FULL_RANKING = """
WITH terms AS (
    SELECT t.lexeme, ln(1 + (s.keyword_chunk_count - t.df + 0.5) / (t.df + 0.5)) AS idf
    FROM keyword_terms t JOIN stores s ON s.id = t.store_id
    WHERE t.store_id = %(store_id)s AND t.df > 0
        AND t.lexeme = ANY(tsvector_to_array(to_tsvector(%(text_search)s::regconfig, %(query_text)s)))),
query AS (
    SELECT regexp_replace(websearch_to_tsquery(%(text_search)s::regconfig, %(query_text)s)::text,
                          ' & (?!!)', ' | ', 'g')::tsquery AS q,
           (SELECT format('{%%s}/536870912',
                          string_agg(d.dimension || ':' || d.idf, ',' ORDER BY d.dimension))::sparsevec
            FROM (SELECT keyword_dimension(lexeme) AS dimension, sum(idf) AS idf FROM terms GROUP BY 1) AS d)
               AS weights)
SELECT k.document_id, k.chunk_index, -(k.weights <#> query.weights) AS keyword_score
FROM keyword_chunks k, query
WHERE k.store_id = %(store_id)s AND k.tsv @@ query.q AND query.weights IS NOT NULL
ORDER BY keyword_score DESC, k.document_id, k.chunk_index
"""

Row = tuple[str, int, float]


def check_set(
    service: Any, name: str, count: int, store_name: str | None = None
) -> tuple[int, list[str], dict[str, list[list[Row]]]]:
    """(result lists compared, differences found, the answers) for set `name`'s queries on its store, or
    on `store_name`."""
    from retrieval_core.db import keyword_sql
    from retrieval_core.db.stores import find_store
    from retrieval_core.evaluation import beir
    from retrieval_core.filters.predicate import TRUE
    from retrieval_core.filters.sql import document_ids_in

    texts = list(beir.read_queries(EVAL / name / "queries.jsonl").values())[:count]
    compared = 0
    differences: list[str] = []
    answers: dict[str, list[list[Row]]] = {}
    with service.database.connection() as conn:
        store = find_store(conn, store_name or f"eval-{name}")
        assert store is not None, f"store {store_name or f'eval-{name}'} is missing: run make eval-all"
        ids = conn.execute("SELECT id FROM documents WHERE store_id = %s ORDER BY id", (store.id,))
        documents = [row[0] for row in ids]
        some = set(documents[::3])
        where = document_ids_in(sorted(some))
        for position, text in enumerate(texts):
            params = {"store_id": store.id, "text_search": store.text_search, "query_text": text}
            full: list[Row] = [(r[0], r[1], float(r[2])) for r in conn.execute(FULL_RANKING, params)]
            filtered_full = [row for row in full if row[0] in some]
            cases = [("unfiltered", TRUE, full)]
            if position < FILTERED_QUERIES and store_name is None:
                cases.append(("filtered", where, filtered_full))
            for label, predicate, reference in cases:
                for limit in LIMITS:
                    with conn.transaction():
                        got = keyword_sql.keyword_chunks(conn, store, text, limit, predicate)
                    answers.setdefault(f"{label} {limit} {text}", []).append(got)
                    compared += 1
                    if got != reference[:limit]:
                        differences.append(f"{name} {label} limit {limit}: {text!r}")
    return compared, differences, answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000, help="queries per set (default: all)")
    parser.add_argument("--store", help="check this store with every set's queries")
    parser.add_argument("--save", type=Path, help="write the answers to this JSON file")
    parser.add_argument("--compare", type=Path, help="compare the answers with this saved JSON file")
    args = parser.parse_args()

    from retrieval_core.container import get_service

    service = get_service()
    sets = sorted(p.name for p in EVAL.iterdir() if (p / "queries.jsonl").exists())
    total = 0
    differences: list[str] = []
    answers: dict[str, Any] = {}
    for name in sets:
        compared, found, set_answers = check_set(service, name, args.queries, args.store)
        print(f"{name}: {compared} result lists, {len(found)} differ from the full ranking", flush=True)
        total += compared
        differences += found
        answers[name] = set_answers
    if args.save:
        args.save.write_text(json.dumps(answers))
    if args.compare:
        before = json.loads(args.compare.read_text())
        now = json.loads(json.dumps(answers))  # tuples as lists, as saved
        changed = [f"{s} {key}" for s in now for key in now[s] if before.get(s, {}).get(key) != now[s][key]]
        print(f"against {args.compare}: {len(changed)} of {total} result lists changed")
        differences += changed
    for line in differences[:20]:
        print("  differs:", line)
    print(f"{total} result lists compared, {len(differences)} differences")
    sys.exit(1 if differences else 0)


if __name__ == "__main__":
    main()
