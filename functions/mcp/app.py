"""Lambda: POST /mcp, MCP over Streamable HTTP (stateless, JSON responses) for agents (docs/mcp.md)."""

from retrieval_core.lambdas.cold_start import collector_paused

with collector_paused():
    from retrieval_core.api.lambda_handler import build_handler
    from retrieval_core.api.mcp.server import mcp_router

    handler = build_handler(mcp_router())
