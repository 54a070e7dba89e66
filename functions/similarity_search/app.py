"""Lambda: POST /api/v1/chunks/similarity-search."""

from retrieval_core.api.lambda_handler import build_handler
from retrieval_core.api.routers import chunks

handler = build_handler(chunks.router)
