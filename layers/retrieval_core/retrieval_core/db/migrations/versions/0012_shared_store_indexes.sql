-- stores share their keyword and metadata indexes: scoped by store id, nothing per store

-- Until now each store added a partial HNSW index and two partial GIN indexes to the shared tables,
-- and a keyword search function of its own. Planning a statement on `chunks` locks and inspects
-- every index of the table, so planning, lock-table use and backend memory grew with the number of
-- stores (from about 2,000 stores, concurrent requests ran out of lock-table space). The GIN indexes
-- are now one each, shared, and their keys carry the store id: a lexeme `word` of store 7 is the key
-- `7:word`, a metadata pair a = 1 of store 7 the path 7.a = 1. A store's lookups therefore read only
-- its own posting lists, as with its own partial index. HNSW indexes remain per store, but only for
-- large stores, at most STORE_INDEXES_MAX of them: db/store_indexes.py builds and drops them
-- concurrently, outside requests; a store without one is searched exactly.
--
-- On a database with chunks, the shared indexes are built CONCURRENTLY by the same maintenance job
-- (db/store_indexes.py), not here: searches use the per-store indexes until the shared ones are
-- valid, and the job drops the per-store ones afterwards.

-- The lexemes of `tsv`, each prefixed with the store id and ':', without positions. A lexeme is cut
-- to its first 250 characters (at most 1,000 bytes), so that the key stays within a lexeme's 2 KB:
-- two lexemes alike in their first 250 characters share a key.
CREATE FUNCTION keyword_scope(store_id integer, tsv tsvector) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $f$
    SELECT coalesce(array_to_tsvector(array_agg(DISTINCT store_id::text || ':' || left(lexeme, 250))),
                    ''::tsvector)
    FROM unnest(tsvector_to_array(tsv)) AS lexeme
    $f$;

-- keyword_any in the keys of keyword_scope(store_id, ...): matches the chunks holding any of `lexemes`.
CREATE FUNCTION keyword_any_in(store_id integer, lexemes text[]) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$
    SELECT coalesce(string_agg('''' || store_id::text || ':'
                                   || replace(replace(left(l, 250), '\', '\\'), '''', '''''') || '''',
                               ' | '), '')::tsquery
    FROM unnest(lexemes) AS l
    $f$;

-- The tsquery `q` in the keys of keyword_scope(store_id, ...), each lexeme prefixed and cut as
-- keyword_scope cuts it. In q's text a lexeme is quoted, a quote in it doubled and a backslash escaped;
-- the pattern reads one such lexeme, its first 250 characters in \1 (250: the most a repetition of
-- PostgreSQL's regular expressions takes). Only for a query of lexemes and | (keyword_keys_exact): the
-- keys hold no positions, and a phrase or an exclusion would make the index recheck every candidate
-- by computing its keys again.
CREATE FUNCTION keyword_scope_query(store_id integer, q tsquery) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $f$
    SELECT regexp_replace(q::text, $p$'((?:[^'\\]|''|\\.){0,250})(?:[^'\\]|''|\\.)*'$p$,
                          '''' || store_id::text || ':\1''', 'g')::tsquery
    $f$;

-- Whether `q` is lexemes of under 250 characters joined by | alone: no &, !, phrase or prefix operator,
-- and no lexeme that its key cuts. (A lexeme holding one of those characters, or a quote followed by
-- 250 characters of lexemes, counts against it: that only costs speed.)
CREATE FUNCTION keyword_keys_exact(q tsquery) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
    AS $f$ SELECT q::text !~ '[&!<:]' AND q::text !~ $p$'(?:[^'\\]|''|\\.){250}$p$ $f$;

-- The metadata under the store id's key: jsonb_path_ops hashes whole paths, so containment of
-- chunk_metadata_scope(7, '{"a": 1}') reads only store 7's entries for a = 1.
CREATE FUNCTION chunk_metadata_scope(store_id integer, metadata jsonb) RETURNS jsonb
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$ SELECT jsonb_build_object(store_id::text, metadata) $f$;

-- chunk_metadata_scope of each element (filters' IN lists).
CREATE FUNCTION chunk_metadata_scopes(store_id integer, metadata jsonb[]) RETURNS jsonb[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$ SELECT ARRAY(SELECT jsonb_build_object(store_id::text, m) FROM unnest(metadata) AS m) $f$;

-- The unfiltered BM25 keyword search of db/search_sql.py (_BM25_KEYWORD_HITS in its scoped form: keep
-- them alike) for any store. PL/pgSQL prepares its statement once per session and keeps the plan:
-- planning the inline statement costs as much as running it. One function serves every store, as the
-- index it reads is shared; the plan is generic (its choices hang on CTE values unknown when planning).
-- Scans are set as the search transaction sets them, so the plan does not depend on the session.
CREATE FUNCTION keyword_hits(searched_store integer, query_text text, text_search regconfig,
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
              WHERE k.store_id = searched_store AND keyword_scope(k.store_id, k.tsv) @@ kq.rarest
                  AND keyword_scope(k.store_id, k.tsv) @@ kq.keyed AND (kq.exact OR k.tsv @@ kq.q)
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
    WHERE k.store_id = searched_store AND keyword_scope(k.store_id, k.tsv) @@ kc.q
        AND keyword_scope(k.store_id, k.tsv) @@ kq.keyed AND (kq.exact OR k.tsv @@ kq.q)
    ORDER BY keyword_score DESC, k.document_id, k.chunk_index
    LIMIT result_limit;
END $fn$;

-- A chunk's vector has its store's dimension. The cast of each store's HNSW index refused other
-- lengths; most stores now have no such index, so the check is a trigger of its own.
CREATE FUNCTION chunk_dimensions_match() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    wrong record;
BEGIN
    SELECT s.name, s.dimension, vector_dims(c.embedding) AS given INTO wrong
    FROM changed_chunks c JOIN stores s ON s.id = c.store_id
    WHERE vector_dims(c.embedding) <> s.dimension LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'store % expected % dimensions, not %', wrong.name, wrong.dimension, wrong.given
            USING ERRCODE = 'data_exception';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_dimensions_checked AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION chunk_dimensions_match();

-- A database without chunks: the shared indexes now, while building them costs nothing; without
-- stores, nothing of the per-store scheme is left to serve, so it goes too.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM chunks LIMIT 1) THEN
        CREATE INDEX IF NOT EXISTS keyword_chunks_scope_gin ON keyword_chunks
            USING gin (keyword_scope(store_id, tsv));
        CREATE INDEX IF NOT EXISTS chunks_metadata_scope_gin ON chunks
            USING gin (chunk_metadata_scope(store_id, metadata) jsonb_path_ops);
    END IF;
    IF NOT EXISTS (SELECT 1 FROM stores LIMIT 1) THEN
        DROP INDEX IF EXISTS chunks_metadata_gin;
        DROP FUNCTION IF EXISTS create_keyword_search(integer);
    END IF;
END $$;
