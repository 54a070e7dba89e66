-- keyword text: the document's title, then the chunk

-- A chunk's keyword text is what its vector was made from: its document's title, a blank
-- line, then the chunk (as every writer embeds it). Without it a scifact or nfcorpus
-- document's title, often its most telling words, matched no keyword query.
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
        INSERT INTO keyword_terms AS k (store_id, lexeme, df)
        SELECT lexed.store_id, t.lexeme, count(*) FROM lexed, unnest(lexed.tsv) AS t
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (store_id, lexeme) DO UPDATE SET df = k.df + EXCLUDED.df)
    INSERT INTO keyword_chunks (store_id, document_id, chunk_index, tsv, length, weights)
    SELECT l.store_id, l.document_id, l.chunk_index, l.tsv, l.length,
           keyword_weights(l.tsv, c.average_length)
    FROM lexed l JOIN counted c ON c.id = l.store_id
    $f$;

-- Every writer deletes a document's chunks before it upserts the document and inserts them
-- again, so a title changes while the document has no chunks. A title changed under existing
-- chunks would leave their keyword rows stale: refused, as an in-place chunk update is.
CREATE FUNCTION document_title_is_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM chunks WHERE store_id = OLD.store_id AND document_id = OLD.id) THEN
        RAISE EXCEPTION 'a document''s title changes only with its chunks (delete them first): '
            'the keyword index holds the title with each chunk';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER documents_title_fixed BEFORE UPDATE OF title ON documents
    FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title)
    EXECUTE FUNCTION document_title_is_fixed();

-- Stores holding titled documents are indexed again by the backfill (db/keywords.py), in
-- batches after this migration; until then they are searched with ts_rank_cd, as before
-- migration 7's backfill. Stores without titles keep their rows: their text is unchanged.
DELETE FROM keyword_chunks WHERE store_id IN (SELECT store_id FROM documents WHERE title <> '');
DELETE FROM keyword_terms WHERE store_id IN (SELECT store_id FROM documents WHERE title <> '');
UPDATE stores SET keyword_chunk_count = 0, keyword_length_sum = 0, keyword_ready = false
    WHERE id IN (SELECT store_id FROM documents WHERE title <> '');
