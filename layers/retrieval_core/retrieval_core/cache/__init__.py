"""Caching of search answers and store names, shared by every Lambda instance through DynamoDB."""
