-- per-store BM25 keyword search functions, whose plans each session keeps

-- A store's unfiltered BM25 keyword search (the keyword_hits CTEs of db/search_sql.py, without
-- filters) as a PL/pgSQL function, keyword_hits_store_<id>. Planning the inline statement took
-- 0.5-0.8 ms a request, as much as running it; PL/pgSQL prepares the statements of a function
-- the first time a session runs them and reuses the plans for the life of the connection
-- (PostgreSQL manual, "PL/pgSQL: Plan Caching"). That cache is the server's own: no PREPARE or
-- named protocol-level statement reaches RDS Proxy, whose pinning follows the statements a
-- client sends (AWS, "Avoiding pinning an RDS Proxy"). One function per store, since a plan
-- reused for every store could not use the store's partial GIN index. A generic plan is
-- forced: the statement's choices hang on CTE values unknown at planning time anyway, so a
-- custom plan would only cost the planning again. Scans are set as the search transaction sets
-- them, so the cached plan does not depend on the session that made it first.
CREATE FUNCTION create_keyword_search(store_id integer) RETURNS void LANGUAGE plpgsql AS $outer$
BEGIN
    EXECUTE format($body$
        CREATE OR REPLACE FUNCTION %1$I(query_text text, text_search regconfig, result_limit integer)
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
                SELECT t.lexeme, t.df,
                       ln(1 + (s.keyword_chunk_count - t.df + 0.5) / (t.df + 0.5)) AS idf
                FROM keyword_terms t JOIN stores s ON s.id = t.store_id
                WHERE t.store_id = %2$s AND t.df > 0 AND t.lexeme = ANY(
                    tsvector_to_array(to_tsvector(text_search, query_text)))),
            keyword_query AS MATERIALIZED (
                SELECT regexp_replace(websearch_to_tsquery(text_search, query_text)::text,
                                      ' & (?!!)', ' | ', 'g')::tsquery AS q,
                       (SELECT format('{%%s}/536870912', string_agg(d.dimension || ':' || d.idf, ','
                                                                   ORDER BY d.dimension))::sparsevec
                        FROM (SELECT keyword_dimension(lexeme) AS dimension, sum(idf) AS idf
                              FROM keyword_terms_of_query GROUP BY 1) AS d) AS weights,
                       (SELECT keyword_any(array_agg(lexeme)) FROM (
                            SELECT lexeme, sum(df) OVER (ORDER BY df, lexeme) - df AS rarer
                            FROM keyword_terms_of_query) AS r
                        WHERE rarer < result_limit) AS rarest),
            keyword_threshold AS MATERIALIZED (
                SELECT CASE WHEN count(*) < result_limit THEN 0 ELSE min(score) * (1 - 1e-6) END
                           AS score
                FROM (SELECT -(k.weights <#> kq.weights) AS score
                      FROM keyword_chunks k, keyword_query kq
                      WHERE k.store_id = %2$s AND k.tsv @@ kq.rarest AND k.tsv @@ kq.q
                      ORDER BY score DESC LIMIT result_limit) AS seeds),
            keyword_bounds AS MATERIALIZED (
                SELECT lexeme, idf, 2.2 * idf AS bound,
                       sum(2.2 * idf) OVER (ORDER BY idf, lexeme) AS reach
                FROM keyword_terms_of_query),
            keyword_candidates AS MATERIALIZED (
                SELECT coalesce(string_agg('(' || heads.q::text || ')', ' | '), '')::tsquery AS q
                FROM (SELECT CASE WHEN h.bound >= th.score THEN keyword_any(ARRAY[h.lexeme])
                                  ELSE keyword_any(ARRAY[h.lexeme]) && (
                                      SELECT keyword_any(array_agg(o.lexeme)) FROM keyword_bounds o
                                      WHERE (o.idf, o.lexeme) < (h.idf, h.lexeme)
                                          AND o.reach >= th.score - h.bound) END AS q
                      FROM keyword_bounds h, keyword_threshold th
                      WHERE h.reach >= th.score) AS heads)
            SELECT k.document_id, k.chunk_index, -(k.weights <#> kq.weights) AS keyword_score
            FROM keyword_chunks k, keyword_query kq, keyword_candidates kc
            WHERE k.store_id = %2$s AND k.tsv @@ kc.q AND k.tsv @@ kq.q
            ORDER BY keyword_score DESC, k.document_id, k.chunk_index
            LIMIT result_limit;
        END $fn$
    $body$, 'keyword_hits_store_' || store_id, store_id);
END $outer$;
SELECT create_keyword_search(id) FROM stores;
