-- store definitions; document sources, content types and fingerprints

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
