"""Request and response schemas of the HTTP API, in one place."""
