-- stores.chunking: a store's own chunking, and the keyword text of contextual chunks

-- A store's own chunking: {"strategy", "size", "overlap"} (documents/chunking.py, Chunking). NULL: the
-- store follows the deployment's CHUNK_SIZE and CHUNK_OVERLAP with the fixed strategy, as every store
-- did before a store could have its own.
ALTER TABLE stores ADD COLUMN chunking jsonb;

-- A chunk's keyword text after its document's title (migration 8): for a store whose chunking is
-- contextual, the chunk's section path, or else its page, goes before its content, as in the text its
-- vector is made from (documents/prepare.py, PreparedDocument.embedding_texts). Others: the content.
CREATE FUNCTION keyword_chunk_text(chunking jsonb, metadata jsonb, content text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $f$
    SELECT CASE
        WHEN chunking->>'strategy' = 'contextual' AND nullif(metadata->>'section', '') IS NOT NULL
            THEN (metadata->>'section') || E'\n\n' || content
        WHEN chunking->>'strategy' = 'contextual' AND metadata->>'pageNumber' IS NOT NULL
            THEN 'page ' || (metadata->>'pageNumber') || E'\n\n' || content
        ELSE content
    END
    $f$;

-- migration 7's trigger function, indexing each chunk's keyword text.
CREATE OR REPLACE FUNCTION keyword_index_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM keyword_index(array_agg(c.store_id), array_agg(c.document_id), array_agg(c.chunk_index),
                          array_agg(keyword_chunk_text(s.chunking, c.metadata, c.content)))
        FROM changed_chunks c JOIN stores s ON s.id = c.store_id;
    RETURN NULL;
END $$;
