"""The write side: store definitions and documents. No HTTP here.

The documents routes, the S3 ingest function and the `retrieval` CLI all write through
`DocumentService`, so every way in parses, chunks, embeds and versions the same way.
"""
