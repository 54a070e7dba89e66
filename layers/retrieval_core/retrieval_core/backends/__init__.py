"""Where a store's chunks live: attached tables and Gemini File Search (pgvector stores: search/ and db/)."""
