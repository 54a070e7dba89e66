-- stores, documents, chunks

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
