"""Per-credential rate limits: fixed windows counted in DynamoDB (or in process); docs/operations.md."""
