-- stores backed by an existing table (attached sources)

-- An attached store searches a table or view the service does not own (a team's own table,
-- langchain-postgres, LlamaIndex): `source` holds its column mapping as validated against the
-- catalog when it was attached (retrieval_core/backends/attached/). NULL: the store's own chunks.
ALTER TABLE stores ADD COLUMN source jsonb;
