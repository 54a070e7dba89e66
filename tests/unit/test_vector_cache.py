"""bench.vector_cache: a re-run embeds nothing it embedded before, and returns the same vectors."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bench.vector_cache import CachedEmbedder, cache_path


class CountingEmbedder:
    """Embeds a text as (its length, its kind's code), recording every text it is asked for."""

    model = "counting-model"
    dimension = 2
    runtime = "onnx"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        self.asked += texts
        return [[float(len(t)), 1.0 if kind == "query" else 2.0] for t in texts]


def test_known_texts_come_from_disk_across_instances(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    first = CachedEmbedder(inner, tmp_path)
    assert first.embed(["ab", "abc", "ab"], "document") == [[2.0, 2.0], [3.0, 2.0], [2.0, 2.0]]
    first.close()
    assert inner.asked == ["ab", "abc", "ab"]

    again = CachedEmbedder(inner, tmp_path)
    assert again.embed(["abc", "abcd"], "document") == [[3.0, 2.0], [4.0, 2.0]]
    assert inner.asked[3:] == ["abcd"]
    assert (again.hits, again.misses) == (1, 1)
    again.close()


def test_the_kind_is_part_of_the_key(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, tmp_path)
    cached.embed(["same"], "document")
    assert cached.embed(["same"], "query") == [[4.0, 1.0]]
    assert inner.asked == ["same", "same"]
    cached.close()


def test_each_model_and_runtime_has_its_own_file(tmp_path: Path) -> None:
    inner = CountingEmbedder()
    onnx = cache_path(tmp_path, inner)
    inner.runtime = "torch"
    assert cache_path(tmp_path, inner) != onnx
    assert onnx.name == "counting-model--onnx.sqlite"
