-- keyword_terms.max_weight: per-lexeme bounds that prune the BM25 search harder

-- The largest term weight any chunk of the store was given for the lexeme: a lexeme adds at most
-- idf * max_weight to a score, a tighter bound than k1 + 1 = 2.2 (scifact: 1.11 at the median).
-- It only grows (deletes leave it), so it stays a bound; it starts again from the new chunks'
-- weights when df is 0, as no chunk holds the lexeme then. 2.2 holds for any weight: it is the
-- value of rows the fill below finds no chunk for.
ALTER TABLE keyword_terms ADD COLUMN max_weight float8 NOT NULL DEFAULT 2.2;

-- Per lexeme of a chunk: the weight keyword_weights stores at its dimension (the sum over the
-- chunk's lexemes sharing that dimension, which is the lexeme's own weight but for a collision).
CREATE FUNCTION keyword_lexeme_weights(tsv tsvector, average_length float8)
    RETURNS TABLE (lexeme text, weight float8)
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$
    SELECT lexeme, sum(weight) OVER (PARTITION BY keyword_dimension(lexeme))
    FROM (SELECT lexeme, tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / greatest(average_length, 1)))
                     AS weight
          FROM (SELECT lexeme, cardinality(positions)::float8 AS tf,
                       sum(cardinality(positions)) OVER () AS length
                FROM unnest(tsv)) AS terms) AS weights
    $f$;

-- Existing rows: the weights as stored (each was computed with the average length of its write),
-- read back from the sparse vector's text, '{dimension:weight,...}/dimensions'.
UPDATE keyword_terms t SET max_weight = m.weight
FROM (SELECT k.store_id, l.lexeme, max(w.weight) AS weight
      FROM keyword_chunks k
          CROSS JOIN LATERAL (
              SELECT split_part(e, ':', 1)::integer AS dimension,
                     split_part(e, ':', 2)::float8 AS weight
              FROM unnest(string_to_array(
                       trim(both '{}' from split_part(k.weights::text, '/', 1)), ',')) AS e) AS w
          JOIN LATERAL unnest(tsvector_to_array(k.tsv)) AS l(lexeme)
              ON keyword_dimension(l.lexeme) = w.dimension
      GROUP BY 1, 2) AS m
WHERE t.store_id = m.store_id AND t.lexeme = m.lexeme;

-- migration 8's keyword_index, keeping max_weight with df.
CREATE OR REPLACE FUNCTION keyword_index(store_ids integer[], document_ids text[],
                                         chunk_indexes integer[], contents text[]) RETURNS void
    LANGUAGE sql AS $f$
    WITH lexed AS (
        SELECT c.store_id, c.document_id, c.chunk_index, l.tsv,
               (SELECT coalesce(sum(cardinality(positions)), 0) FROM unnest(l.tsv))::integer AS length
        FROM unnest(store_ids, document_ids, chunk_indexes, contents)
                 AS c(store_id, document_id, chunk_index, content)
            JOIN stores s ON s.id = c.store_id
            LEFT JOIN documents d ON d.store_id = c.store_id AND d.id = c.document_id,
            LATERAL (SELECT to_tsvector(s.text_search,
                                        coalesce(nullif(d.title, '') || E'\n\n', '') || c.content)
                         AS tsv) AS l),
    totals AS (SELECT store_id, count(*) AS n, sum(length) AS length FROM lexed GROUP BY store_id),
    counted AS (
        UPDATE stores s SET keyword_chunk_count = s.keyword_chunk_count + t.n,
                            keyword_length_sum = s.keyword_length_sum + t.length
        FROM totals t WHERE s.id = t.store_id
        RETURNING s.id, s.keyword_length_sum::float8 / s.keyword_chunk_count AS average_length),
    terms AS (
        INSERT INTO keyword_terms AS k (store_id, lexeme, df, max_weight)
        SELECT l.store_id, w.lexeme, count(*), max(w.weight)
        FROM lexed l JOIN counted c ON c.id = l.store_id,
            keyword_lexeme_weights(l.tsv, c.average_length) AS w
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (store_id, lexeme) DO UPDATE SET
            df = k.df + EXCLUDED.df,
            max_weight = CASE WHEN k.df = 0 THEN EXCLUDED.max_weight
                              ELSE greatest(k.max_weight, EXCLUDED.max_weight) END)
    INSERT INTO keyword_chunks (store_id, document_id, chunk_index, tsv, length, weights)
    SELECT l.store_id, l.document_id, l.chunk_index, l.tsv, l.length,
           keyword_weights(l.tsv, c.average_length)
    FROM lexed l JOIN counted c ON c.id = l.store_id
    $f$;

-- migration 9's search functions, with the bounds above (db/search_sql.py's _BM25_KEYWORD_HITS
-- says how the search prunes) and seeds from the rarest lexemes up to twice the limit's chunks.
CREATE OR REPLACE FUNCTION create_keyword_search(store_id integer) RETURNS void
    LANGUAGE plpgsql AS $outer$
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
                SELECT t.lexeme, t.df, t.max_weight,
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
                        WHERE rarer < 2 * result_limit) AS rarest),
            keyword_threshold AS MATERIALIZED (
                SELECT CASE WHEN count(*) < result_limit THEN 0 ELSE min(score) * (1 - 1e-6) END
                           AS score
                FROM (SELECT -(k.weights <#> kq.weights) AS score
                      FROM keyword_chunks k, keyword_query kq
                      WHERE k.store_id = %2$s AND k.tsv @@ kq.rarest AND k.tsv @@ kq.q
                      ORDER BY score DESC LIMIT result_limit) AS seeds),
            keyword_bounds AS MATERIALIZED (
                SELECT lexeme, bound, sum(bound) OVER (ORDER BY bound, lexeme) AS reach
                FROM (SELECT lexeme, idf * max_weight * (1 + 1e-5) AS bound
                      FROM keyword_terms_of_query) AS b),
            keyword_candidates AS MATERIALIZED (
                SELECT coalesce(string_agg('(' || heads.q::text || ')', ' | '), '')::tsquery AS q
                FROM (SELECT CASE WHEN h.bound >= th.score THEN keyword_any(ARRAY[h.lexeme])
                                  ELSE keyword_any(ARRAY[h.lexeme]) && (
                                      SELECT keyword_any(array_agg(o.lexeme)) FROM keyword_bounds o
                                      WHERE (o.bound, o.lexeme) < (h.bound, h.lexeme)
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
