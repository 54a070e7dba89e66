"""Lambda: POST /api/v1/rag/retrieve, POST /api/v1/rag/retrieve/batch and GET /api/v1/health."""

from retrieval_core.api.lambda_handler import build_handler
from retrieval_core.api.routers import health, retrieve

handler = build_handler(retrieve.router, health.router)
