"""pgvector-python's `Vector`, from each release we support, and vectors read back as lists.

pgvector-python 0.4 moved `Vector` to the package's top level and loads `vector` columns as `Vector`;
0.3 (the newest that langchain-postgres 0.0.x allows) keeps it in `pgvector.utils` and loads numpy
arrays. Supporting both lets teams install us beside langchain-postgres.
"""

from __future__ import annotations

from typing import Any

try:
    from pgvector import Vector
except ImportError:  # pgvector-python 0.3
    from pgvector.utils import Vector  # type: ignore[no-redef]

__all__ = ["Vector", "as_floats"]


def as_floats(loaded: Any) -> list[float]:
    """A `vector` column's value as loaded (a `Vector`, or a numpy array with pgvector 0.3) as floats."""
    values = loaded.to_list() if isinstance(loaded, Vector) else loaded
    return [float(value) for value in values]
