"""Lambda: POST /api/v1/chunks/similarity-search."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import chunks

    # The caller brings the embedding: no provider client to trace (or import at cold start).
    handler = build_handler(chunks.router, embeds=False)
