-- keyword search on the shared index: the scoped query rewritten without bounded repetitions, its tsquery computed once

-- The `{0,250}` of migration 12's pattern makes PostgreSQL's regular expression engine expand 250
-- copies of its group: about 0.17 ms a call, most of what keyword search on the shared index cost
-- over a store's own index. When no lexeme's quoted text reaches 250 characters, no key is cut and the
-- same rewrite takes an unbounded group (under 0.01 ms). A query text shorter than 250 characters has
-- no such lexeme, so the bounded check only runs on long queries.
CREATE OR REPLACE FUNCTION keyword_scope_query(store_id integer, q tsquery) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $f$
    SELECT CASE WHEN length(q::text) < 250 OR q::text !~ $p$'(?:[^'\\]|''|\\.){250}$p$
        THEN regexp_replace(q::text, $p$'((?:[^'\\]|''|\\.)*)'$p$, '''' || store_id::text || ':\1''', 'g')
        ELSE regexp_replace(q::text, $p$'((?:[^'\\]|''|\\.){0,250})(?:[^'\\]|''|\\.)*'$p$,
                            '''' || store_id::text || ':\1''', 'g')
        END::tsquery
    $f$;

CREATE OR REPLACE FUNCTION keyword_keys_exact(q tsquery) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $f$
    SELECT q::text !~ '[&!<:]' AND (length(q::text) < 250 OR q::text !~ $p$'(?:[^'\\]|''|\\.){250}$p$)
    $f$;

-- keyword_hits of migration 14 with one change: the query's tsquery and whether it is words alone are
-- computed once. Pulled up into keyword_query, the subqueries made the planner repeat the expression at
-- each use: websearch_to_tsquery four times, keyword_keys_exact twice (OFFSET 0 keeps a subquery whole).
CREATE OR REPLACE FUNCTION keyword_hits(searched_store integer, query_text text, text_search regconfig,
                             result_limit integer)
    RETURNS TABLE (document_id text, chunk_index integer, keyword_score float8)
    LANGUAGE plpgsql STABLE
    SET plan_cache_mode = force_generic_plan
    SET enable_seqscan = off
    SET enable_bitmapscan = on
    AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH keyword_terms_of_query AS MATERIALIZED (
        SELECT t.lexeme, t.df, t.max_weight,
               ln(1 + (s.keyword_chunk_count - t.df + 0.5) / (t.df + 0.5)) AS idf
        FROM keyword_terms t JOIN stores s ON s.id = t.store_id
        WHERE t.store_id = searched_store AND t.df > 0 AND t.lexeme = ANY(
            tsvector_to_array(to_tsvector(text_search, query_text)))),
    keyword_query AS MATERIALIZED (
        SELECT w.q, w.exact,
               CASE WHEN w.exact THEN keyword_scope_query(searched_store, w.q)
                    ELSE keyword_any_in(searched_store, tsvector_to_array(to_tsvector(text_search, query_text)))
               END AS keyed,
               (SELECT format('{%s}/536870912', string_agg(d.dimension || ':' || d.idf, ','
                                                           ORDER BY d.dimension))::sparsevec
                FROM (SELECT keyword_dimension(lexeme) AS dimension, sum(idf) AS idf
                      FROM keyword_terms_of_query GROUP BY 1) AS d) AS weights,
               (SELECT keyword_any_in(searched_store, array_agg(lexeme)) FROM (
                    SELECT lexeme, sum(df) OVER (ORDER BY df, lexeme) - df AS rarer
                    FROM keyword_terms_of_query) AS r
                WHERE rarer < 2 * result_limit) AS rarest
        FROM (SELECT q, keyword_keys_exact(q) AS exact
              FROM (SELECT regexp_replace(websearch_to_tsquery(text_search, query_text)::text,
                                          ' & (?!!)', ' | ', 'g')::tsquery AS q OFFSET 0) AS t
              OFFSET 0) AS w),
    keyword_threshold AS MATERIALIZED (
        SELECT CASE WHEN count(*) < result_limit THEN 0 ELSE min(score) * (1 - 1e-6) END AS score
        FROM (SELECT -(k.weights <#> kq.weights) AS score
              FROM keyword_chunks k, keyword_query kq
              WHERE keyword_scope(k.store_id, k.tsv) @@ kq.rarest
                  AND keyword_scope(k.store_id, k.tsv) @@ kq.keyed AND (kq.exact OR k.tsv @@ kq.q) AND k.store_id + 0 = searched_store
              ORDER BY score DESC LIMIT result_limit) AS seeds),
    keyword_bounds AS MATERIALIZED (
        SELECT lexeme, bound, sum(bound) OVER (ORDER BY bound, lexeme) AS reach
        FROM (SELECT lexeme, idf * max_weight * (1 + 1e-5) AS bound FROM keyword_terms_of_query) AS b),
    keyword_candidates AS MATERIALIZED (
        SELECT coalesce(string_agg('(' || heads.q::text || ')', ' | '), '')::tsquery AS q
        FROM (SELECT CASE WHEN h.bound >= th.score THEN keyword_any_in(searched_store, ARRAY[h.lexeme])
                          ELSE keyword_any_in(searched_store, ARRAY[h.lexeme]) && (
                              SELECT keyword_any_in(searched_store, array_agg(o.lexeme))
                              FROM keyword_bounds o
                              WHERE (o.bound, o.lexeme) < (h.bound, h.lexeme)
                                  AND o.reach >= th.score - h.bound) END AS q
              FROM keyword_bounds h, keyword_threshold th
              WHERE h.reach >= th.score) AS heads)
    SELECT k.document_id, k.chunk_index, -(k.weights <#> kq.weights) AS keyword_score
    FROM keyword_chunks k, keyword_query kq, keyword_candidates kc
    WHERE keyword_scope(k.store_id, k.tsv) @@ kc.q
        AND keyword_scope(k.store_id, k.tsv) @@ kq.keyed AND (kq.exact OR k.tsv @@ kq.q) AND k.store_id + 0 = searched_store
    ORDER BY keyword_score DESC, k.document_id, k.chunk_index
    LIMIT result_limit;
END $fn$;
