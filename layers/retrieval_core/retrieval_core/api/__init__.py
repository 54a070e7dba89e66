"""The HTTP API: an app factory, routers, and the one place errors become responses."""
