"""Lambda: store definitions and documents (PUT/GET/DELETE /api/v1/stores/..., GET /api/v1/stores), and
the web console's files (GET /console)."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import console, documents

    handler = build_handler(documents.router, console.router)
