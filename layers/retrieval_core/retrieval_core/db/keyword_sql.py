"""The keyword side of a search: BM25 over `keyword_chunks`, alone or as the CTE of a hybrid search.

Every value a caller sends is a bound parameter; a store's id is composed with `sql.Literal` (it comes
from our own `stores` table). The GIN index read is the one shared by every store, whose keys carry the
store id (`keyword_scope(store_id, tsv)`, migration 12), or while an upgraded database still builds it,
the store's own partial index on the plain tsvector.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from retrieval_core.db.chunk_filters import allow_bitmap_scans, filters_clause, where_params
from retrieval_core.db.connection import Connection
from retrieval_core.db.stores import Store
from retrieval_core.filters.predicate import Predicate


# Natural-language queries should match chunks with any of their words, ranked by how well they
# cover them: websearch_to_tsquery ANDs every word, so its ANDs between positive terms become ORs.
# Quoted phrases stay phrases; a -word keeps its AND, binding to the term before it.
def keyword_tsquery(config: str) -> str:
    websearch = f"websearch_to_tsquery({config}, %(query_text)s)"
    return f"regexp_replace({websearch}::text, ' & (?!!)', ' | ', 'g')::tsquery"


# Stores whose chunks predate migration 7 until the backfill has weighed them all: the old ranking,
# ts_rank_cd on the english tsvector of chunks (every such store is english: the setting is newer).
LEGACY_KEYWORD_HITS = """keyword_hits AS MATERIALIZED (
               SELECT document_id, chunk_index, ts_rank_cd(tsv, keywords.q) AS keyword_score
               FROM chunks, (SELECT {tsquery} AS q) AS keywords
               WHERE store_id = {store_id}{filters} AND tsv @@ keywords.q
               ORDER BY keyword_score DESC, document_id, chunk_index
               LIMIT %(limit)s)"""

# BM25 (migration 15 holds the same statement without filters, in its scoped form, as the function
# keyword_hits: keep them alike). OFFSET 0 computes the query's tsquery once: pulled up, each use of
# q repeated websearch_to_tsquery. {keys} are the keys the GIN index holds, {any_of} the function making
# the tsquery of some lexemes in those keys (`keyword_lookup`). The query's lexemes (in the store's
# configuration) weighted by their IDF ln(1 + (N - df + 0.5) / (df + 0.5)) form a sparse vector; a
# chunk's score is its inner product with the chunk's stored term weights, computed exactly for every
# candidate. Lexemes no chunk holds
# (df 0) weigh nothing.
#
# Candidates (exact pruning): a lexeme adds at most its bound, idf * max_weight, to any score; max_weight
# is the largest term weight a chunk of the store was given for it (keyword_terms, migration 11; below
# k1 + 1 = 2.2), raised by 1e-5 for the float4 rounding of stored weights. `threshold` is the
# `limit`-th best score among the seeds, the chunks holding the query's rarest lexemes (those whose
# rarer lexemes hold fewer than twice `limit` chunks: a document's chunks share its title's words, so
# `limit` chunks' worth of rare lexemes often sit in fewer than `limit` chunks, which left no threshold),
# less a millionth of it (scores are float sums). A chunk can reach it only through the query lexemes it
# holds: take the one with the largest bound, its head. Heads whose bound plus the bounds of every
# lexeme below them stays under the threshold are left out; a head whose bound alone falls short must
# come with one of the lexemes below it, and among those only the ones whose bound plus the bounds below
# them cover the shortfall (a chunk's second lexeme is such a one). The candidate tsquery ORs, per head,
# the head alone or the head AND any of those. Scifact, limit 20, 100 queries: 338 chunks scored (seeds
# and candidates) at the median, 428 on average, of 3,659 matching; 582 and 818 with the bound 2.2 and
# seeds up to `limit`. Every candidate still matches the full tsquery (phrases, -exclusions) and the
# filters, and is scored exactly: bench/keyword_exactness.py compares every top k of the dev sets with
# the full ranking.
BM25_KEYWORD_HITS = """keyword_terms_of_query AS MATERIALIZED (
               SELECT t.lexeme, t.df, t.max_weight,
                      ln(1 + (s.keyword_chunk_count - t.df + 0.5) / (t.df + 0.5)) AS idf
               FROM keyword_terms t JOIN stores s ON s.id = t.store_id
               WHERE t.store_id = {store_id} AND t.df > 0 AND t.lexeme = ANY(
                   tsvector_to_array(to_tsvector(%(text_search)s::regconfig, %(query_text)s)))),
           keyword_query AS MATERIALIZED (
               SELECT w.q, w.exact, {keyed} AS keyed,
                      (SELECT format('{{%%s}}/536870912', string_agg(d.dimension || ':' || d.idf, ','
                                                                      ORDER BY d.dimension))::sparsevec
                       FROM (SELECT keyword_dimension(lexeme) AS dimension, sum(idf) AS idf
                             FROM keyword_terms_of_query GROUP BY 1) AS d) AS weights,
                      (SELECT {any_of}array_agg(lexeme)) FROM (
                           SELECT lexeme, sum(df) OVER (ORDER BY df, lexeme) - df AS rarer
                           FROM keyword_terms_of_query) AS r
                       WHERE rarer < 2 * %(limit)s) AS rarest
               FROM (SELECT q, {exact} AS exact FROM (SELECT {tsquery} AS q OFFSET 0) AS t OFFSET 0) AS w),
           keyword_threshold AS MATERIALIZED (
               SELECT CASE WHEN count(*) < %(limit)s THEN 0 ELSE min(score) * (1 - 1e-6) END AS score
               FROM (SELECT -(k.weights <#> kq.weights) AS score
                     FROM keyword_chunks k, keyword_query kq
                     WHERE {keys} @@ kq.rarest AND {matches_query}{filters}
                     ORDER BY score DESC LIMIT %(limit)s) AS seeds),
           keyword_bounds AS MATERIALIZED (
               SELECT lexeme, bound, sum(bound) OVER (ORDER BY bound, lexeme) AS reach
               FROM (SELECT lexeme, idf * max_weight * (1 + 1e-5) AS bound FROM keyword_terms_of_query) AS b),
           keyword_candidates AS MATERIALIZED (
               SELECT coalesce(string_agg('(' || heads.q::text || ')', ' | '), '')::tsquery AS q
               FROM (SELECT CASE WHEN h.bound >= th.score THEN {any_of}ARRAY[h.lexeme])
                                 ELSE {any_of}ARRAY[h.lexeme]) && (
                                     SELECT {any_of}array_agg(o.lexeme)) FROM keyword_bounds o
                                     WHERE (o.bound, o.lexeme) < (h.bound, h.lexeme)
                                         AND o.reach >= th.score - h.bound) END AS q
                     FROM keyword_bounds h, keyword_threshold th
                     WHERE h.reach >= th.score) AS heads),
           keyword_hits AS MATERIALIZED (
               SELECT k.document_id, k.chunk_index, -(k.weights <#> kq.weights) AS keyword_score
               FROM keyword_chunks k, keyword_query kq, keyword_candidates kc
               WHERE {keys} @@ kc.q AND {matches_query}{filters}
               ORDER BY keyword_score DESC, k.document_id, k.chunk_index
               LIMIT %(limit)s)"""


# Without filters, the function keyword_hits (migration 15) runs the statement of BM25_KEYWORD_HITS
# with a plan its session keeps: the inline statement's planning cost as much as running it. The LIMIT changes
# no row (the function returns at most `limit`) but tells the planner so: it estimates 1,000 rows for a
# set-returning function, and then joins the hits to `chunks` by hashing the whole store (6 ms on
# msmarco-5k) instead of looking up 40 keys.
STORED_KEYWORD_HITS = """keyword_hits AS MATERIALIZED (
               SELECT document_id, chunk_index, keyword_score
               FROM keyword_hits({store_id}, %(query_text)s, %(text_search)s::regconfig, %(limit)s)
               LIMIT %(limit)s)"""


def keyword_lookup(store: Store) -> dict[str, sql.Composable]:
    """{keys}, {any_of}, {exact}, {keyed} and {matches_query} of BM25_KEYWORD_HITS: the shared index's
    store-scoped keys, or while it is being built, the plain tsvector of the store's own partial index.

    {any_of} opens a call its use closes. The index answers the whole query too (`keyed`): a query of
    words alone exactly, in the scoped keys; one with phrases or exclusions as any of its lexemes, and
    then the chunk's own tsvector is checked against it (the keys hold no positions). Every scoped key
    carries the store id, so the store's condition only guards, written so that no index answers it:
    read by the primary key, a store's rows would each have their keys computed (the function's
    generic plan did that for a store of 200,000 chunks: 7 s).
    """
    if store.scoped_indexes:
        keys = sql.SQL("keyword_scope(k.store_id, k.tsv)")
        store_id = sql.Literal(store.id)
        return {
            "keys": keys,
            "any_of": sql.SQL("keyword_any_in({}, ").format(store_id),
            "exact": sql.SQL("keyword_keys_exact(q)"),
            "keyed": sql.SQL(
                "CASE WHEN w.exact THEN keyword_scope_query({store_id}, w.q) ELSE keyword_any_in({store_id},"
                " tsvector_to_array(to_tsvector(%(text_search)s::regconfig, %(query_text)s))) END"
            ).format(store_id=store_id),
            "matches_query": sql.SQL(
                "{} @@ kq.keyed AND (kq.exact OR k.tsv @@ kq.q) AND k.store_id + 0 = {}"
            ).format(keys, store_id),
        }
    return {
        "keys": sql.SQL("k.tsv"),
        "any_of": sql.SQL("keyword_any("),
        "exact": sql.SQL("true"),
        "keyed": sql.SQL("w.q"),
        "matches_query": sql.SQL("k.tsv @@ kq.keyed AND k.store_id = {}").format(sql.Literal(store.id)),
    }


def keyword_hits_cte(store: Store, where_sql: str) -> sql.Composed:
    """The CTE(s) ending in `keyword_hits`: the `limit` best keyword matches, best first."""
    if not store.keyword_ready:
        return sql.SQL(LEGACY_KEYWORD_HITS).format(
            tsquery=sql.SQL(keyword_tsquery("'english'")),
            store_id=sql.Literal(store.id),
            filters=filters_clause(where_sql),
        )
    if not inline_keywords(store, where_sql):
        return sql.SQL(STORED_KEYWORD_HITS).format(store_id=sql.Literal(store.id))
    # The filter names chunk columns: it is checked on the chunk the keyword row belongs to.
    filters = (
        sql.SQL(
            " AND EXISTS (SELECT 1 FROM chunks WHERE chunks.store_id = {store_id}"
            " AND chunks.document_id = k.document_id AND chunks.chunk_index = k.chunk_index AND ({where}))"
        ).format(store_id=sql.Literal(store.id), where=sql.SQL(where_sql))
        if where_sql
        else sql.SQL("")
    )
    return sql.SQL(BM25_KEYWORD_HITS).format(
        tsquery=sql.SQL(keyword_tsquery("%(text_search)s::regconfig")),
        store_id=sql.Literal(store.id),
        filters=filters,
        **keyword_lookup(store),
    )


def inline_keywords(store: Store, where_sql: str) -> bool:
    """Whether the keyword side is the inline statement; the function keyword_hits sets its own scans (a
    round trip less), and serves unfiltered searches once the shared index is valid."""
    return bool(where_sql) or not store.keyword_ready or not store.scoped_indexes


def keyword_chunks_query(store: Store, where: Predicate) -> sql.Composed:
    """The `limit` best keyword matches alone: (document_id, chunk_index, keyword_score), best first."""
    return sql.SQL(
        "WITH {keyword_hits} SELECT * FROM keyword_hits ORDER BY keyword_score DESC, document_id, chunk_index"
    ).format(keyword_hits=keyword_hits_cte(store, where.sql))


def keyword_params(store: Store, query_text: str, limit: int, where: Predicate) -> dict[str, Any]:
    """Parameters of `keyword_chunks_query`."""
    return {
        "query_text": query_text,
        "text_search": store.text_search,
        "limit": limit,
        **where_params(store, where),
    }


def keyword_chunks(
    conn: Connection, store: Store, query_text: str, limit: int, where: Predicate
) -> list[tuple[str, int, float]]:
    """(document id, chunk index, keyword score) of the `limit` best keyword matches, best first.

    The GIN index is read through a bitmap scan, which is turned on (SET LOCAL) for the inline statement.
    """
    if inline_keywords(store, where.sql):
        allow_bitmap_scans(conn)
    rows = conn.execute(
        keyword_chunks_query(store, where), keyword_params(store, query_text, limit, where)
    ).fetchall()
    return [(r[0], r[1], float(r[2])) for r in rows]
