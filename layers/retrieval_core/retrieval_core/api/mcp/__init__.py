"""MCP for agents: memory_search, memory_store, memory_delete, retrieve and list_stores (docs/mcp.md).

`tools` is pure retrieval core (it never imports the `mcp` SDK); `server` wires it to the SDK's
Streamable HTTP transport and is imported only where the SDK is installed (the MCP Lambda function,
and `retrieval serve` when the `local` extra brought it).
"""
