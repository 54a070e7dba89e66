"""Lambda: store definitions and documents (PUT/GET/DELETE /api/v1/stores/..., GET /api/v1/stores)."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import documents

    handler = build_handler(documents.router)
