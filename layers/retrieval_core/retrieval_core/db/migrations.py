"""Versioned, idempotent schema migrations. Safe to run from many processes at once.

A run takes an advisory lock and applies every missing migration in one transaction: it applies all
of them or, on any failure, none. Migrations only add (tables, columns, indexes, constraints); none
drops data. Given a time budget (a Lambda's remaining time), a run retries connecting while the budget
allows and bounds every statement by the time left, so that it fails and rolls back rather than being
killed half-way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from retrieval_core.clients.retry import Deadline, backoff_delay
from retrieval_core.db.keywords import Backfill, backfill_keywords
from retrieval_core.db.schema import ensure_pgvector, require_pgvector, schema_version
from retrieval_core.exceptions import (
    ConfigurationError,
    DatabaseUnavailableError,
    MigrationError,
    MigrationTimeoutError,
)

logger = logging.getLogger(__name__)

# Any constant works; it only serialises concurrent migrators (pg_advisory_xact_lock).
MIGRATION_LOCK_KEY = 7_351_902_114
# A connection attempt or a statement is not started with less time than this left.
_MIN_ATTEMPT_S = 1.0
_CONNECT_RETRY_BASE_S = 0.5
_CONNECT_RETRY_MAX_S = 10.0

Migration = tuple[int, str, str]

MIGRATIONS: list[Migration] = [
    (
        1,
        "stores, documents, chunks",
        """
        CREATE EXTENSION IF NOT EXISTS vector;

        -- Store versions come from one sequence, so a store dropped and created again under the
        -- same name never reuses a version (cache keys include it).
        CREATE SEQUENCE store_versions;

        CREATE TABLE stores (
            id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            name text NOT NULL UNIQUE CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$'),
            display_name text NOT NULL,
            embedding_model text NOT NULL,
            dimension integer NOT NULL CHECK (dimension BETWEEN 1 AND 16000),
            version bigint NOT NULL DEFAULT nextval('store_versions'),
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now()
        );

        CREATE TABLE documents (
            store_id integer NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            id text NOT NULL,
            title text NOT NULL DEFAULT '',
            metadata jsonb NOT NULL DEFAULT '{}',
            content_sha256 text NOT NULL,
            chunk_count integer NOT NULL,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (store_id, id)
        );

        -- The embedding column is untyped so stores of different models share the table;
        -- each store gets a partial HNSW index on embedding::vector(its dimension).
        CREATE TABLE chunks (
            store_id integer NOT NULL,
            document_id text NOT NULL,
            chunk_index integer NOT NULL CHECK (chunk_index >= 0),
            id text GENERATED ALWAYS AS (document_id || '#' || chunk_index::text) STORED,
            content text NOT NULL,
            metadata jsonb NOT NULL DEFAULT '{}',
            embedding vector NOT NULL,
            tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
            PRIMARY KEY (store_id, document_id, chunk_index),
            FOREIGN KEY (store_id, document_id) REFERENCES documents (store_id, id) ON DELETE CASCADE
        );

        CREATE INDEX chunks_metadata_gin ON chunks USING gin (metadata jsonb_path_ops);
        CREATE INDEX chunks_tsv_gin ON chunks USING gin (tsv);
        """,
    ),
    (
        2,
        "stores.storage: vector or halfvec index",
        """
        -- halfvec stores index embedding::halfvec(dim) with halfvec_cosine_ops: half the index size.
        ALTER TABLE stores ADD COLUMN storage text NOT NULL DEFAULT 'vector'
            CHECK (storage IN ('vector', 'halfvec'));
        """,
    ),
    (
        3,
        "per-store partial GIN index on chunk metadata",
        """
        -- The exact search path finds a selective filter's rows through this index. With only the
        -- shared GIN index, the planner also ANDed a bitmap of the whole store from the primary key
        -- (store_id = n): 19 ms of a 28 ms query on a store of 200,000 chunks.
        DO $$
        DECLARE store_id integer;
        BEGIN
            FOR store_id IN SELECT id FROM stores LOOP
                EXECUTE format(
                    'CREATE INDEX IF NOT EXISTS %I ON chunks USING gin (metadata jsonb_path_ops) '
                    'WHERE store_id = %s',
                    'chunks_metadata_gin_store_' || store_id, store_id);
            END LOOP;
        END $$;
        """,
    ),
    (
        4,
        "store definitions; document sources, content types and fingerprints",
        """
        -- The store definition of PUT /api/v1/stores/{store}. NULL: every key the service allows.
        ALTER TABLE stores ADD COLUMN allowed_metadata_keys text[];
        -- `resolve` is a route (GET /api/v1/stores/resolve), never a store. NOT VALID: an existing
        -- store of that name keeps working; new ones are refused.
        ALTER TABLE stores ADD CONSTRAINT stores_name_not_reserved
            CHECK (name NOT IN ('resolve')) NOT VALID;

        -- source: the file (or API request) a document was read from; the rows of one CSV or JSONL
        -- file are documents of their own that share it. source_sha256: SHA-256 of that file's bytes.
        -- content_sha256: SHA-256 of this document's own bytes (the file's, or its record's).
        -- fingerprint: what shaped the stored chunks besides the content (parser, chunking, model);
        -- '' for documents written before this migration, so their next write re-embeds them.
        ALTER TABLE documents
            ADD COLUMN source text,
            ADD COLUMN source_sha256 text,
            ADD COLUMN content_type text NOT NULL DEFAULT 'text/plain',
            ADD COLUMN fingerprint text NOT NULL DEFAULT '',
            ADD COLUMN created_at timestamptz NOT NULL DEFAULT now();
        UPDATE documents SET source = id;
        ALTER TABLE documents ALTER COLUMN source SET NOT NULL;
        -- S3's key limit: document ids are any UTF-8 string of 1 to 1,024 bytes.
        ALTER TABLE documents ADD CONSTRAINT documents_id_length
            CHECK (octet_length(id) BETWEEN 1 AND 1024) NOT VALID;
        CREATE INDEX documents_store_source ON documents (store_id, source);

        -- Ordered, at-least-once sources (S3 events): the newest sequencer applied per object key, so
        -- an older event never overwrites a newer state. Kept after a delete (deleted = true): the
        -- same bytes uploaded again reuse their ETag, so only the sequencer can order them.
        CREATE TABLE source_sequences (
            store_id integer NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            object_key text NOT NULL,
            sequencer text NOT NULL,
            deleted boolean NOT NULL,
            applied_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (store_id, object_key)
        );

        -- Metadata a source's sidecar (`<key>.metadata.json`) gives its documents; kept even before
        -- the source itself arrives, and merged under every write of that source.
        CREATE TABLE source_metadata (
            store_id integer NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
            source text NOT NULL,
            metadata jsonb NOT NULL,
            PRIMARY KEY (store_id, source)
        );
        """,
    ),
    (
        5,
        "documents: the metadata layers a write laid over each other",
        """
        -- A document's metadata is the file's, overlaid with its source's sidecar, overlaid with the
        -- writer's. Kept apart so that a sidecar change recomputes it exactly (the writer's keys keep
        -- winning). NULL for documents written before: a sidecar change then works from the result.
        ALTER TABLE documents
            ADD COLUMN file_metadata jsonb,
            ADD COLUMN caller_metadata jsonb;
        """,
    ),
    (
        6,
        "stores.chunk_count, kept by triggers on chunks",
        """
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
        """,
    ),
    (
        7,
        "BM25 keyword index: per-store text search configuration, chunk term weights, document frequencies",
        """
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
            FROM (SELECT '''' || replace(replace(l, '\\', '\\\\'), '''', '''''') || '''' AS quoted
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
        """,
    ),
    (
        8,
        "keyword text: the document's title, then the chunk",
        """
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
                                                coalesce(nullif(d.title, '') || E'\\n\\n', '') || c.content)
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
        """,
    ),
    (
        9,
        "per-store BM25 keyword search functions, whose plans each session keeps",
        """
        -- A store's unfiltered BM25 keyword search (the keyword_hits CTEs of db/repository.py, without
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
        """,
    ),
    (
        10,
        "stores backed by an existing table (attached sources)",
        """
        -- An attached store searches a table or view the service does not own (a team's own table,
        -- langchain-postgres, LlamaIndex): `source` holds its column mapping as validated against the
        -- catalog when it was attached (retrieval_core/backends/attached/). NULL: the store's own chunks.
        ALTER TABLE stores ADD COLUMN source jsonb;
        """,
    ),
    (
        11,
        "keyword_terms.max_weight: per-lexeme bounds that prune the BM25 search harder",
        """
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
                                                coalesce(nullif(d.title, '') || E'\\n\\n', '') || c.content)
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

        -- migration 9's search functions, with the bounds above (db/repository.py's _BM25_KEYWORD_HITS
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
        """,
    ),
]

# The schema version this code needs: the newest migration's.
SCHEMA_VERSION = MIGRATIONS[-1][0]


@dataclass(frozen=True)
class Migrated:
    """What a migration run did and left."""

    applied: list[int]  # the versions this run applied, in order ([] when the schema was up to date)
    schema_version: int  # the database's afterwards; newer than SCHEMA_VERSION after a code rollback
    pgvector_version: str


def migrate(conninfo: str, connect_timeout_s: int = 5, *, time_budget_s: float | None = None) -> list[int]:
    """Apply every migration not yet recorded; return the versions applied now."""
    return run_migrations(conninfo, connect_timeout_s=connect_timeout_s, time_budget_s=time_budget_s).applied


def run_migrations(
    conninfo: str,
    *,
    connect_timeout_s: int = 5,
    time_budget_s: float | None = None,
    migrations: Sequence[Migration] = MIGRATIONS,
) -> Migrated:
    """Apply every migration of `migrations` not yet recorded, in one transaction, within the budget.

    time_budget_s None: one connection attempt and no statement timeout (a long migration run by hand).
    Raises DatabaseUnavailableError when no connection could be made, PgvectorVersionError,
    MigrationTimeoutError when the budget ran out, MigrationError when a statement failed.
    """
    deadline = Deadline(time_budget_s)
    applied: list[int] = []
    conn = connect(conninfo, connect_timeout_s, deadline)
    # statement_timeout bounds each statement, and a migration is many: this bounds their sum.
    guard = _cancel_at_deadline(conn, deadline)
    step = "starting"
    try:
        with conn, conn.transaction():
            step = "waiting for the migration lock (another migration holds it while it runs)"
            _bound_next_statement(conn, deadline, step)
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
            step = "checking the pgvector extension"
            _bound_next_statement(conn, deadline, step)
            ensure_pgvector(conn)
            conn.execute(
                """CREATE TABLE IF NOT EXISTS schema_migrations (
                           version integer PRIMARY KEY,
                           name text NOT NULL,
                           applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for version, name, ddl in migrations:
                if version in done:
                    continue
                step = f"applying migration {version} ({name})"
                _bound_next_statement(conn, deadline, step)
                conn.execute(ddl.encode())
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
                applied.append(version)
            step = "checking the migrated schema"
            _bound_next_statement(conn, deadline, step)
            pgvector = require_pgvector(conn)
            version_after = schema_version(conn) or 0
            step = "committing"
    except psycopg.errors.QueryCanceled as exc:
        if deadline.budget_s is None:
            raise MigrationError(
                f"the schema migration was cancelled while {step} (by an operator or the server); "
                "it was rolled back: nothing of this run was applied",
                {"step": step},
            ) from exc
        raise _out_of_time(deadline, step) from exc
    except psycopg.OperationalError as exc:
        raise MigrationError(
            f"the connection to PostgreSQL was lost while {step}; the migration was rolled back: nothing "
            "of this run was applied. Run it again",
            {"step": step, "sqlstate": exc.sqlstate},
        ) from exc
    except psycopg.Error as exc:
        # Only the SQLSTATE travels: driver messages can quote hosts, users and values.
        raise MigrationError(
            f"the schema migration failed while {step} (SQLSTATE {exc.sqlstate or 'unknown'}, "
            f"{type(exc).__name__}); it was rolled back: nothing of this run was applied",
            {"step": step, "sqlstate": exc.sqlstate},
        ) from exc
    finally:
        if guard is not None:
            guard.cancel()
    if applied:
        logger.info(
            "applied migrations %s; schema at version %s (pgvector %s)",
            ", ".join(map(str, applied)),
            version_after,
            pgvector,
        )
    return Migrated(applied, version_after, pgvector)


def run_keyword_backfill(
    conninfo: str, connect_timeout_s: int = 5, *, time_budget_s: float | None = None
) -> Backfill:
    """After the migrations: index the chunks written before migration 7 (db/keywords.py), within the budget.

    Batches commit one by one, so a run cut off by its budget keeps what it did and the next run goes on.
    """
    deadline = Deadline(time_budget_s)
    with connect(conninfo, connect_timeout_s, deadline) as conn:
        return backfill_keywords(conn, deadline)


def connect(conninfo: str, connect_timeout_s: int, deadline: Deadline) -> psycopg.Connection[Any]:
    """An autocommit connection; with a deadline, connection failures are retried while time is left.

    A database behind a new RDS Proxy refuses connections for a minute or two after the stack creates it.
    """
    try:
        conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        # `from None`: the parser's message can quote the password ("unexpected spaces found in ...").
        raise ConfigurationError(
            "the database connection string (DATABASE_URL) is malformed: check its syntax; a password "
            "with spaces or special characters must be percent-encoded"
        ) from None
    attempts = 0
    started = time.monotonic()
    while True:
        attempts += 1
        remaining = deadline.remaining_s()
        timeout_s = connect_timeout_s if remaining is None else max(1, min(connect_timeout_s, int(remaining)))
        try:
            return psycopg.connect(conninfo, autocommit=True, connect_timeout=timeout_s)
        except psycopg.OperationalError as exc:
            if remaining is None:
                raise
            left = deadline.remaining_s() or 0.0
            if left < _MIN_ATTEMPT_S:
                raise DatabaseUnavailableError(
                    f"could not connect to PostgreSQL: {attempts} attempts in "
                    f"{time.monotonic() - started:.0f} s failed (refused, timed out or not authenticated; "
                    "the function's log has the driver's message). A new RDS Proxy can take a few "
                    "minutes to accept connections: deploy again; otherwise check DATABASE_HOST, the "
                    "security groups and the database credentials",
                    {"operation": "connecting to migrate the schema", "attempts": attempts},
                ) from exc
            # The last attempt still gets _MIN_ATTEMPT_S.
            delay = min(
                backoff_delay(attempts, _CONNECT_RETRY_BASE_S, _CONNECT_RETRY_MAX_S), left - _MIN_ATTEMPT_S
            )
            logger.warning(
                "could not connect to PostgreSQL (attempt %d, %s); retrying in %.1f s",
                attempts,
                type(exc).__name__,
                delay,
            )
            time.sleep(delay)


def _cancel_at_deadline(conn: psycopg.Connection[Any], deadline: Deadline) -> threading.Timer | None:
    """Cancel whatever `conn` runs once the deadline passes (a QueryCanceled, then a rollback)."""
    remaining = deadline.remaining_s()
    if remaining is None:
        return None

    def cancel() -> None:
        try:
            conn.cancel_safe(timeout=5)
        except psycopg.Error as exc:
            # statement_timeout still bounds the statement running now.
            logger.warning("could not cancel the migration at its deadline (%s)", type(exc).__name__)

    timer = threading.Timer(max(0.0, remaining), cancel)
    timer.daemon = True
    timer.start()
    return timer


def _bound_next_statement(conn: psycopg.Connection[Any], deadline: Deadline, step: str) -> None:
    """Let the next statements of this transaction run at most until the deadline."""
    remaining = deadline.remaining_s()
    if remaining is not None and remaining < _MIN_ATTEMPT_S:
        raise _out_of_time(deadline, step)
    # No deadline: no limit either, so that a role's default statement_timeout cannot cut a long
    # migration run by hand. Local to the transaction: nothing outlives the run.
    timeout_ms = 0 if remaining is None else int(remaining * 1000)
    conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(timeout_ms),))


def _out_of_time(deadline: Deadline, step: str) -> MigrationTimeoutError:
    return MigrationTimeoutError(
        f"the schema migration ran out of its {deadline.budget_s or 0:.0f} s while {step}; it was rolled "
        "back: nothing of this run was applied. A migration that takes this long must run outside "
        "Lambda: run `retrieval migrate` with DATABASE_URL set, from a host that reaches the database "
        "(docs/migrations.md), then deploy again",
        {"step": step, "timeBudgetS": deadline.budget_s},
    )
