"""all-MiniLM-L6-v2 on onnxruntime: the graph `minilm_graph.py` builds from the packaged weights.

The ONNX file is found, in order: beside the model files (`model.<variant>.onnx`; the Lambda embedder
layer ships it there, built at layer build time, since Lambda can write nowhere but /tmp), else in the
cache directory under a name keyed by the weights' SHA-256 and the graph builder's version, else it is
built there once (about a second; the int8 variant a few more and the `onnx` package) and reused by every
later process.

Only `LocalEmbedder` imports this module, on the first embedding.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from retrieval_core.embeddings.minilm import Floats, Ints, TokenBatchEncoder
from retrieval_core.embeddings.onnxruntime_env import quiet_onnxruntime

if TYPE_CHECKING:
    from onnxruntime import InferenceSession

# fp32: float32 weights and arithmetic. w8: int8 weights (one scale per output channel), float32
# arithmetic. int8: int8 weights and activations (onnxruntime's dynamic quantisation).
OnnxVariant = Literal["fp32", "w8", "int8"]


def model_file(model_dir: Path, variant: OnnxVariant, cache_dir: Path) -> Path:
    """The ONNX file of `variant`: shipped beside the model, else cached, else built into the cache."""
    shipped = model_dir / f"model.{variant}.onnx"
    if shipped.is_file():
        return shipped
    from retrieval_core.embeddings.minilm_graph import GRAPH_VERSION

    weights = model_dir / "model.safetensors"
    if not weights.is_file():
        raise FileNotFoundError(
            f"{model_dir} has neither {shipped.name} nor model.safetensors to build it from"
        )
    digest = _sha256(weights)[:16]
    cached = cache_dir / f"all-MiniLM-L6-v2-{digest}-g{GRAPH_VERSION}.{variant}.onnx"
    if not cached.is_file():
        build(model_dir, variant, cached)
    return cached


def build(model_dir: Path, variant: OnnxVariant, target: Path) -> None:
    """Write the ONNX file of `variant` to `target`, atomically: concurrent builders never see half a file."""
    from retrieval_core.embeddings.minilm_graph import build_fp32, quantize_int8

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as scratch:
        fp32 = Path(scratch) / "model.fp32.onnx"
        fp32.write_bytes(build_fp32(model_dir, int8_weights=variant == "w8"))
        built = fp32
        if variant == "int8":
            built = Path(scratch) / "model.int8.onnx"
            quantize_int8(fp32, built)
        os.replace(built, target)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


class OnnxMiniLMEncoder(TokenBatchEncoder):
    """Tokenizer and batching as the numpy encoder; each batch runs through one onnxruntime session."""

    def __init__(
        self, model_dir: Path, onnx_file: Path, batch_size: int = 64, sort_by_length: bool = True
    ) -> None:
        super().__init__(model_dir, batch_size, sort_by_length)
        self.onnx_file = onnx_file
        self.session = _session(onnx_file)

    def _embed_batch(self, ids: Ints, types: Ints, mask: Ints) -> Floats:
        feeds = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        (embeddings,) = self.session.run(["sentence_embedding"], feeds)
        return np.asarray(embeddings, dtype=np.float32)


def _session(onnx_file: Path) -> InferenceSession:
    quiet_onnxruntime()
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: the shape-merge warnings of a dynamic batch are noise
    return onnxruntime.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])
