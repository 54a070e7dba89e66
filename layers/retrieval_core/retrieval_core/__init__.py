"""Retrieval core: the logic shared by every handler of the retrieval service."""

__version__ = "0.1.0"
