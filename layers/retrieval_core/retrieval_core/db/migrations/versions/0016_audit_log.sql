-- audit_log: one row per change, and documents.written_by

-- Every change (a store created, redefined, attached, refreshed or deleted; a document written or
-- deleted) writes its rows here in the transaction of the change itself: a change rolled back leaves
-- none. `store` is the store's name, not a reference: a deleted store's rows outlive it. `credential`
-- is the name of the API key entry, the JWT subject, the S3 principal or the command-line user, never
-- a key. Rows older than AUDIT_RETENTION_DAYS are deleted by the scheduled maintenance.
CREATE TABLE audit_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT now(),
    credential text NOT NULL,
    store text NOT NULL,
    document_id text,
    action text NOT NULL,
    outcome text NOT NULL,
    request_id text
);

-- "Who changed this document": a store's rows, or one document's, newest first.
CREATE INDEX audit_log_store_document ON audit_log (store, document_id, at);
-- Retention deletes the oldest rows first.
CREATE INDEX audit_log_at ON audit_log (at);

-- Who last wrote each document (the credential of its last change; NULL: written before this version).
-- Nullable and without a default: a change of the catalog only, with no rewrite of the table.
ALTER TABLE documents ADD COLUMN written_by text;
