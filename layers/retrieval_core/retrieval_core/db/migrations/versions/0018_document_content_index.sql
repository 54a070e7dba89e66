-- documents: an index on each store's content hashes, for duplicates found at write time

-- A write names the stored documents whose content_sha256 equals its own (`duplicateOf`, db/documents.py
-- `same_content_ids`). Without this index that lookup reads every document of the store; with it, one
-- probe per document written. The key begins with the store id, as every lookup on the shared tables
-- does, so the cost does not grow with the number of stores. The documents table holds one row per
-- document (not per chunk), so the build is short; writes wait for it, searches do not.
CREATE INDEX documents_store_content ON documents (store_id, content_sha256);
