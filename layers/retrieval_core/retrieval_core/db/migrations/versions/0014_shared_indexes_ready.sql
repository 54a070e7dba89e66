-- shared_indexes_ready(): whether the shared keyword and metadata indexes are valid, as a constant

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
