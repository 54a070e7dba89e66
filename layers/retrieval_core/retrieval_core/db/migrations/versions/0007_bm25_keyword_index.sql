-- BM25 keyword index: per-store text search configuration, chunk term weights, document frequencies

-- A store's text search configuration, used at write and at query time alike (immutable).
-- keyword_chunk_count, keyword_length_sum: how many chunks are in keyword_chunks and their summed
-- lengths (lexeme occurrences), for N and the average length of BM25. keyword_ready: every chunk
-- of the store is in keyword_chunks; stores holding chunks before this migration wait for the
-- backfill (db/keywords.py) and are searched with ts_rank_cd on chunks.tsv until then.
ALTER TABLE stores
    ADD COLUMN text_search regconfig NOT NULL DEFAULT 'english',
    ADD COLUMN keyword_chunk_count bigint NOT NULL DEFAULT 0,
    ADD COLUMN keyword_length_sum bigint NOT NULL DEFAULT 0,
    ADD COLUMN keyword_ready boolean NOT NULL DEFAULT true;
UPDATE stores SET keyword_ready = false WHERE chunk_count > 0;

-- Per store and lexeme: in how many chunks it occurs (the df of BM25's IDF). Rows whose df
-- fell to 0 stay; they weigh nothing, since no chunk matches them.
CREATE TABLE keyword_terms (
    store_id integer NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
    lexeme text NOT NULL,
    df bigint NOT NULL,
    PRIMARY KEY (store_id, lexeme)
);

-- Per chunk: its lexemes in the store's configuration and their BM25 term weights
-- tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average length)), a sparse vector whose
-- dimensions are hashes of the lexemes. Apart from chunks, so that writing weights never
-- touches the chunks' HNSW index, and a keyword search reads narrow rows.
CREATE TABLE keyword_chunks (
    store_id integer NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
    document_id text NOT NULL,
    chunk_index integer NOT NULL,
    tsv tsvector NOT NULL,
    length integer NOT NULL,
    weights sparsevec NOT NULL,
    PRIMARY KEY (store_id, document_id, chunk_index)
);
DO $$
DECLARE store_id integer;
BEGIN
    FOR store_id IN SELECT id FROM stores LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON keyword_chunks USING gin (tsv) WHERE store_id = %s',
            'keyword_chunks_tsv_gin_store_' || store_id, store_id);
    END LOOP;
END $$;

-- The dimension of a lexeme: 29 bits of its 64-bit hash, 1-based (sparsevec allows up to 1e9).
CREATE FUNCTION keyword_dimension(lexeme text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$ SELECT (hashtextextended(lexeme, 0) & 536870911)::integer + 1 $f$;

-- BM25 term weights of a chunk, k1 = 1.2, b = 0.75 (docs/quality.md says why). Lexemes whose
-- hashes collide share a dimension and add up.
CREATE FUNCTION keyword_weights(tsv tsvector, average_length float8) RETURNS sparsevec
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$
    SELECT format('{%s}/536870912', string_agg(dimension || ':' || weight, ',' ORDER BY dimension))
        ::sparsevec
    FROM (SELECT keyword_dimension(lexeme) AS dimension,
                 sum(tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / greatest(average_length, 1))))
                     AS weight
          FROM (SELECT lexeme, cardinality(positions)::float8 AS tf,
                       sum(cardinality(positions)) OVER () AS length
                FROM unnest(tsv)) AS terms
          GROUP BY 1) AS dimensions
    $f$;

-- The tsquery matching any of `lexemes`, taken as they are (already normalised): quoted, with
-- backslashes and quotes escaped as tsquery input wants them.
CREATE FUNCTION keyword_any(lexemes text[]) RETURNS tsquery
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$
    SELECT coalesce(string_agg(quoted, ' | '), '')::tsquery
    FROM (SELECT '''' || replace(replace(l, '\', '\\'), '''', '''''') || '''' AS quoted
          FROM unnest(lexemes) AS l) AS q
    $f$;

-- Index chunks: lexemes in their store's configuration, counts first (so the average length
-- the weights use includes these chunks), then the rows. Called by the insert trigger and the
-- backfill, with the store's row already locked (lock order: stores, then keyword_terms).
CREATE FUNCTION keyword_index(store_ids integer[], document_ids text[], chunk_indexes integer[],
                              contents text[]) RETURNS void
    LANGUAGE sql AS $f$
    WITH lexed AS (
        SELECT c.store_id, c.document_id, c.chunk_index, l.tsv,
               (SELECT coalesce(sum(cardinality(positions)), 0) FROM unnest(l.tsv))::integer AS length
        FROM unnest(store_ids, document_ids, chunk_indexes, contents)
                 AS c(store_id, document_id, chunk_index, content)
            JOIN stores s ON s.id = c.store_id,
            LATERAL (SELECT to_tsvector(s.text_search, c.content) AS tsv) AS l),
    totals AS (SELECT store_id, count(*) AS n, sum(length) AS length FROM lexed GROUP BY store_id),
    counted AS (
        UPDATE stores s SET keyword_chunk_count = s.keyword_chunk_count + t.n,
                            keyword_length_sum = s.keyword_length_sum + t.length
        FROM totals t WHERE s.id = t.store_id
        RETURNING s.id, s.keyword_length_sum::float8 / s.keyword_chunk_count AS average_length),
    terms AS (
        INSERT INTO keyword_terms AS k (store_id, lexeme, df)
        SELECT lexed.store_id, t.lexeme, count(*) FROM lexed, unnest(lexed.tsv) AS t
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (store_id, lexeme) DO UPDATE SET df = k.df + EXCLUDED.df)
    INSERT INTO keyword_chunks (store_id, document_id, chunk_index, tsv, length, weights)
    SELECT l.store_id, l.document_id, l.chunk_index, l.tsv, l.length,
           keyword_weights(l.tsv, c.average_length)
    FROM lexed l JOIN counted c ON c.id = l.store_id
    $f$;

-- Statement triggers with transition tables, as for chunk_count: every writer (COPY, cascading
-- deletes) keeps the keyword index current. Named after chunks_count_*, so they fire after it
-- and find the store's row locked by it.
CREATE FUNCTION keyword_index_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM keyword_index(array_agg(store_id), array_agg(document_id), array_agg(chunk_index),
                          array_agg(content))
        FROM changed_chunks;
    RETURN NULL;
END $$;
CREATE FUNCTION keyword_index_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH gone AS (
        DELETE FROM keyword_chunks k USING changed_chunks c
        WHERE k.store_id = c.store_id AND k.document_id = c.document_id
            AND k.chunk_index = c.chunk_index
        RETURNING k.store_id, k.tsv, k.length),
    totals AS (SELECT store_id, count(*) AS n, sum(length) AS length FROM gone GROUP BY store_id),
    counted AS (
        UPDATE stores s SET keyword_chunk_count = s.keyword_chunk_count - t.n,
                            keyword_length_sum = s.keyword_length_sum - t.length
        FROM totals t WHERE s.id = t.store_id)
    UPDATE keyword_terms k SET df = k.df - g.n
    FROM (SELECT gone.store_id, t.lexeme, count(*) AS n FROM gone, unnest(gone.tsv) AS t
          GROUP BY 1, 2) AS g
    WHERE k.store_id = g.store_id AND k.lexeme = g.lexeme;
    RETURN NULL;
END $$;
CREATE FUNCTION keyword_index_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE keyword_chunks, keyword_terms;
    UPDATE stores SET keyword_chunk_count = 0, keyword_length_sum = 0, keyword_ready = true;
    RETURN NULL;
END $$;
-- Chunks are replaced, never edited: an update of their text would leave the index stale.
CREATE FUNCTION chunk_text_is_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'chunks are replaced (deleted and inserted), never updated in place: the '
        'keyword index is kept by the insert and delete triggers';
END $$;
CREATE TRIGGER chunks_keyword_inserted AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION keyword_index_inserted();
CREATE TRIGGER chunks_keyword_deleted AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION keyword_index_deleted();
CREATE TRIGGER chunks_keyword_truncated AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION keyword_index_truncated();
CREATE TRIGGER chunks_text_fixed BEFORE UPDATE OF store_id, document_id, chunk_index, content
    ON chunks FOR EACH ROW EXECUTE FUNCTION chunk_text_is_fixed();
