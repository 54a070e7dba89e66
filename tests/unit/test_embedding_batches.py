"""The local model embeds long chunks in batches bounded by tokens, with the vectors of one text at a time."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from retrieval_core.embeddings.local import LocalEmbedder
from retrieval_core.embeddings.minilm import MAX_BATCH_TOKENS, TOKENIZE_TEXTS, token_batches

_WORDS = ["river", "council", "harvest", "winter", "market", "village", "season", "report", "garden"]


def _chunks(count: int, characters: int) -> list[str]:
    rng = random.Random(count)
    texts = []
    for _ in range(count):
        words: list[str] = []
        while len(" ".join(words)) < characters:
            words.append(rng.choice(_WORDS))
        texts.append(" ".join(words)[:characters])
    return texts


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Any:
    embedder = LocalEmbedder(batch_size=64, runtime="onnx", cache_dir=tmp_path_factory.mktemp("onnx-cache"))
    return embedder._load().__self__  # type: ignore[attr-defined]


def _batch_shapes(encoder: Any, texts: list[str]) -> tuple[Any, list[tuple[int, int]]]:
    """The vectors of `texts`, and the (rows, tokens) shape of each batch the encoder ran."""
    shapes: list[tuple[int, int]] = []
    run = encoder._embed_batch

    def recorded(ids: Any, types: Any, mask: Any) -> Any:
        shapes.append(ids.shape)
        return run(ids, types, mask)

    encoder._embed_batch = recorded
    try:
        return encoder.encode(texts), shapes
    finally:
        del encoder._embed_batch


def test_token_batches_keep_order_rows_and_padded_size() -> None:
    lengths = [256, 250, 200, 40, 30, 30, 12, 3000, 8]
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches = list(token_batches(order, lengths, rows=4, tokens=512))
    assert [i for batch in batches for i in batch] == order
    for batch in batches:
        assert len(batch) <= 4
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 512
    assert [7] in batches  # longer than the cap: alone


def test_long_chunks_go_in_batches_within_the_token_cap(encoder: Any) -> None:
    texts = _chunks(40, 1000)
    together, shapes = _batch_shapes(encoder, texts)
    assert sum(rows for rows, _ in shapes) == 40
    assert all(rows * width <= MAX_BATCH_TOKENS for rows, width in shapes)
    # 1,000 characters are over 128 tokens: far fewer than the 64 texts EMBEDDING_BATCH_SIZE allows.
    assert max(rows for rows, _ in shapes) <= MAX_BATCH_TOKENS // 128 < 64
    alone = np.vstack([encoder.encode([text]) for text in texts[:5]])
    assert np.allclose(together[:5], alone, atol=1e-5)


def test_more_texts_than_one_tokenizer_window_keep_their_order(encoder: Any) -> None:
    texts = _chunks(TOKENIZE_TEXTS + 20, 60)
    together = encoder.encode(texts)
    assert together.shape == (len(texts), 384)
    for i in (0, TOKENIZE_TEXTS - 1, TOKENIZE_TEXTS, len(texts) - 1):
        assert np.allclose(together[i], encoder.encode([texts[i]])[0], atol=1e-5)


def test_short_passages_still_share_large_batches(encoder: Any) -> None:
    _, shapes = _batch_shapes(encoder, _chunks(64, 80))
    assert shapes and shapes[0][0] == 64
