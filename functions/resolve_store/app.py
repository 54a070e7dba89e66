"""Lambda: GET /api/v1/stores/resolve."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import stores

    handler = build_handler(stores.router)
