"""The `retrieval` command."""
