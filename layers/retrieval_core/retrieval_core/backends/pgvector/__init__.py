"""The pgvector backend: our own stores and attached tables, searched through one pipeline."""
