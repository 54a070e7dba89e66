"""Debug lines, metrics and health checks."""
