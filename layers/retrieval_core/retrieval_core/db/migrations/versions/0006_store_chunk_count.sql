-- stores.chunk_count, kept by triggers on chunks

-- How many chunks a store holds: the search path weighs an exact scan against the HNSW index
-- with it (retrieval_core/search/plan.py). Kept by statement triggers, so every writer counts,
-- COPY and cascading deletes included, and no ANALYZE moves it. Chunks never change store.
ALTER TABLE stores ADD COLUMN chunk_count bigint NOT NULL DEFAULT 0;
UPDATE stores SET chunk_count = counted.n
    FROM (SELECT store_id, count(*) AS n FROM chunks GROUP BY store_id) AS counted
    WHERE stores.id = counted.store_id;

-- One function for both triggers: each names its transition table changed_chunks.
CREATE FUNCTION count_changed_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE stores SET chunk_count = stores.chunk_count
            + CASE TG_OP WHEN 'INSERT' THEN changed.n ELSE -changed.n END
        FROM (SELECT store_id, count(*) AS n FROM changed_chunks GROUP BY store_id) AS changed
        WHERE stores.id = changed.store_id;
    RETURN NULL;
END $$;
CREATE FUNCTION count_no_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE stores SET chunk_count = 0;
    RETURN NULL;
END $$;
CREATE TRIGGER chunks_count_inserted AFTER INSERT ON chunks
    REFERENCING NEW TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION count_changed_chunks();
CREATE TRIGGER chunks_count_deleted AFTER DELETE ON chunks
    REFERENCING OLD TABLE AS changed_chunks
    FOR EACH STATEMENT EXECUTE FUNCTION count_changed_chunks();
CREATE TRIGGER chunks_count_truncated AFTER TRUNCATE ON chunks
    FOR EACH STATEMENT EXECUTE FUNCTION count_no_chunks();
