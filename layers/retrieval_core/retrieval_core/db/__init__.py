"""PostgreSQL + pgvector: connections, schema, and the SQL of the retrieval core."""
