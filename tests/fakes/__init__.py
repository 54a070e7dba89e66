"""Local fake servers that speak the documented REST shapes of the providers we call."""

from __future__ import annotations

import hashlib
import math
import struct


def fake_vector(text: str, dimension: int, *, salt: str = "", normalize: bool = True) -> list[float]:
    """A deterministic pseudo-embedding of `text`: the same input always gives the same vector."""
    values: list[float] = []
    counter = 0
    while len(values) < dimension:
        digest = hashlib.sha256(f"{salt}\x00{text}\x00{counter}".encode()).digest()
        # Eight unsigned 32-bit ints per digest, mapped to [-1, 1].
        values.extend(n / 2**31 - 1.0 for n in struct.unpack(">8I", digest))
        counter += 1
    values = values[:dimension]
    if normalize:
        norm = math.sqrt(math.fsum(v * v for v in values))
        values = [v / norm for v in values]
    return values
