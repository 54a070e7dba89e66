"""How a store's index holds its embeddings: 4-byte floats, or 2-byte floats (half the index size). Pure."""

from __future__ import annotations

from typing import Literal, get_args

Storage = Literal["vector", "halfvec"]
STORAGE_TYPES: tuple[Storage, ...] = get_args(Storage)
