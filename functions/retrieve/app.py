"""Lambda: POST /api/v1/rag/retrieve, /rag/retrieve/batch, /rag/answer, /knowledge/search,
/stores/{store}/evaluate and GET /api/v1/health."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.routers import answer, evaluate, health, knowledge, retrieve

    handler = build_handler(retrieve.router, answer.router, knowledge.router, evaluate.router, health.router)
