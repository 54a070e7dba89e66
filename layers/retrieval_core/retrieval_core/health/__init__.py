"""GET /api/v1/health: the checks of the database, schema, pgvector and embedder."""
