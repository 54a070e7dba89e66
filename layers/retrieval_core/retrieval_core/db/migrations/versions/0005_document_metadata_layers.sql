-- documents: the metadata layers a write laid over each other

-- A document's metadata is the file's, overlaid with its source's sidecar, overlaid with the
-- writer's. Kept apart so that a sidecar change recomputes it exactly (the writer's keys keep
-- winning). NULL for documents written before: a sidecar change then works from the result.
ALTER TABLE documents
    ADD COLUMN file_metadata jsonb,
    ADD COLUMN caller_metadata jsonb;
