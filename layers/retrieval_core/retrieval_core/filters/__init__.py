"""Metadata filters: the string form, the JSON tree, and their compilation to SQL parameters."""
