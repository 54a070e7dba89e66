-- shared_indexes_ready(); no GIN pending lists; keyword_hits reads the shared index for any store

-- Every search reads its store's row, and with it whether the store-scoped forms of its statements
-- have their indexes (Store.scoped_indexes). Asking pg_index for it cost about 0.1 ms a request; a SQL
-- function whose body is a constant is folded into the plan. The store index maintenance replaces it
-- with `SELECT true` once both indexes are valid (db/store_indexes.py); they are never dropped
-- afterwards, so it never goes back. A cached plan that folded it is invalidated when it is replaced.
DO $$
BEGIN
    EXECUTE format(
        'CREATE FUNCTION shared_indexes_ready() RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
        'SELECT ' || (SELECT (count(*) = 2)::text FROM pg_index
                      WHERE indisvalid AND indexrelid IN (to_regclass('keyword_chunks_scope_gin'),
                                                          to_regclass('chunks_metadata_scope_gin'))));
END $$;

-- The shared GIN indexes take inserted entries straight into their trees. With fastupdate (GIN's
-- default) they first go to a pending list of up to gin_pending_list_limit (4 MB) that every search
-- reads through until a vacuum empties it: one index for every store made each tenant's writes slow
-- every tenant's keyword and filtered searches. Setting it takes no lock that waits for reads or
-- writes; what the list holds now goes into the tree here.
ALTER INDEX IF EXISTS keyword_chunks_scope_gin SET (fastupdate = off);
ALTER INDEX IF EXISTS chunks_metadata_scope_gin SET (fastupdate = off);
SELECT gin_clean_pending_list(to_regclass(name))
FROM unnest(ARRAY['keyword_chunks_scope_gin', 'chunks_metadata_scope_gin']) AS name
WHERE to_regclass(name) IS NOT NULL;

-- keyword_hits of migration 12 with one change: its rows are found through the shared index alone. Its
-- plan is made once per session for every store, without knowing the store's size: with
-- `k.store_id = searched_store` it could read a store's rows by the primary key and compute each one's
-- keys, which a generic plan took for a store of about a hundred rows (the average) and then ran on one
-- of 200,000 (7 s). Every key it matches carries the store id, so the condition only guards, written
-- so that no index answers it.
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
                                          ' & (?!!)', ' | ', 'g')::tsquery AS q) AS t) AS w),
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
