-- document_status and ingestion_counts: each source's last outcome, each store's counts; documents.source_key

-- The last outcome of each source a write received, by store and source id (a PUT's document id, an S3
-- object's or a file's id, a memory's id; a CSV or JSONL file is one row, not one per record). A source
-- that failed has no row in `documents`, so the row is keyed here by (store, id) alone. outcome: ok
-- (change: created, updated or unchanged), failed or skipped (code and message: the error's). A failed
-- write rolls back, so its row is written in a short transaction of its own. Deleting the source
-- deletes its row; deleting the store deletes them all. Shared by every store, keyed by store id.
CREATE TABLE document_status (
    store_id integer NOT NULL REFERENCES stores (id) ON DELETE CASCADE,
    document_id text NOT NULL,
    outcome text NOT NULL CHECK (outcome IN ('ok', 'failed', 'skipped')),
    change text CHECK (change IN ('created', 'updated', 'unchanged')),
    code text,
    message text,
    written_by text,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (store_id, document_id)
);

-- "Which sources failed": a store's rows of one outcome, in id order (GET ...documents?status=failed).
CREATE INDEX document_status_outcome ON document_status (store_id, outcome, document_id COLLATE "C");

-- Each store's cumulative counts of sources, since its first write was counted (`since`), as
-- Bedrock Knowledge Bases reports an ingestion job: scanned = added + updated + unchanged + failed +
-- skipped; deleted counts the sources deleted.
CREATE TABLE ingestion_counts (
    store_id integer PRIMARY KEY REFERENCES stores (id) ON DELETE CASCADE,
    scanned bigint NOT NULL DEFAULT 0,
    added bigint NOT NULL DEFAULT 0,
    updated bigint NOT NULL DEFAULT 0,
    unchanged bigint NOT NULL DEFAULT 0,
    deleted bigint NOT NULL DEFAULT 0,
    failed bigint NOT NULL DEFAULT 0,
    skipped bigint NOT NULL DEFAULT 0,
    since timestamptz NOT NULL DEFAULT now(),
    last_at timestamptz NOT NULL DEFAULT now()
);

-- What a write of the same source would be read from: SHA-256 of the source's bytes' hash, its declared
-- content type, its file name and its parse options (documents/prepare.py, `source_key`). A write whose
-- key and fingerprint match every stored document of its source, with the same metadata, is answered
-- `unchanged` without parsing. NULL (written before this migration): the next write parses once.
ALTER TABLE documents ADD COLUMN source_key text;
