"""Stores backed by a table the service does not own (docs/existing-tables.md).

`definition` (pure) says what an attached source is; `catalog` checks one against the database;
`search` reads it; `plan` chooses between its index and a capped exact scan; `stores` attaches and
refreshes; `features` says what a source supports.
"""
