"""Build the ONNX graph of all-MiniLM-L6-v2 from the packaged `model.safetensors`.

No torch, no download and no `onnx` package: every node is written here (encoded by `onnx_proto.py`), every
weight read from the safetensors file. The graph takes `input_ids`, `token_type_ids` and `attention_mask`
(int64, batch x tokens) and returns the sentence embeddings (batch x 384): BERT, mean pooling over real
tokens and L2 normalisation, as the sentence-transformers pipeline. `quantize_int8` makes the int8
variant with onnxruntime's dynamic quantisation, which needs `onnx` (the dev extra). Only the ONNX
runtime (`minilm_onnx.py`) imports this module, and only when no built file is at hand.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_core.embeddings import onnx_proto
from retrieval_core.exceptions import ConfigurationError

# Opset 20: LayerNormalization (17), reduce ops taking their axes as an input (18), Gelu (20).
OPSET = 20
IR_VERSION = 9
# Bumped whenever the graph or its file's bytes change, so that files built by an older builder are
# not reused.
GRAPH_VERSION = 1


class _Graph:
    """Encoded nodes and initializers, named uniquely as they are added."""

    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, hint: str, value: Any) -> str:
        name = self.name(hint)
        self.initializers.append(onnx_proto.tensor(name, value))
        return name

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs: Any) -> str:
        out = self.name(hint or op_type.lower())
        self.nodes.append(onnx_proto.node(op_type, inputs, [out], name=out, attributes=attrs))
        return out


def build_fp32(model_dir: Path, int8_weights: bool = False) -> bytes:
    """The float32 graph of the model in `model_dir`: the bytes of its ONNX file (90 MB; 23.5 MB w8).

    `int8_weights`: the dense kernels and the word embeddings are stored as int8 with one scale per
    output channel (a quarter of the size) and dequantised by the graph; the arithmetic stays float32.
    """
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    bert = _Bert(config, load_file(str(model_dir / "model.safetensors")), int8_weights)
    x = bert.embeddings()
    # Padding keys get the most negative float added to their scores, as transformers does.
    mask = bert.g.op("Cast", ["attention_mask"], to=onnx_proto.FLOAT)
    attention = bert.attention_constants(mask)
    for i in range(int(config["num_hidden_layers"])):
        x = bert.encoder_layer(x, f"encoder.layer.{i}.", attention)
    bert.sentence_embedding(x, mask)

    def int_input(name: str) -> bytes:
        return onnx_proto.value_info(name, onnx_proto.INT64, ["batch", "tokens"])

    graph = onnx_proto.graph(
        "all-MiniLM-L6-v2",
        bert.g.nodes,
        bert.g.initializers,
        [int_input("input_ids"), int_input("token_type_ids"), int_input("attention_mask")],
        [onnx_proto.value_info("sentence_embedding", onnx_proto.FLOAT, ["batch", bert.hidden])],
    )
    return onnx_proto.model(graph, IR_VERSION, OPSET, producer_name="retrieval_core.minilm_graph")


@dataclass(frozen=True)
class _Attention:
    """The graph names attention reads in every layer: the padding bias and the head reshapes."""

    key_bias: str
    split_heads: str
    merge_heads: str
    scale: str


class _Bert:
    """Adds BERT's parts to a graph, reading their weights from the safetensors tensors."""

    def __init__(self, config: dict[str, Any], weights: dict[str, Any], int8_weights: bool) -> None:
        self.g = _Graph()
        self.weights = weights
        self.int8_weights = int8_weights
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.head_size = self.hidden // self.heads
        self.eps = float(config["layer_norm_eps"])

    def w(self, name: str) -> str:
        """The float32 weight `name` as a constant."""
        return self.g.const(name.replace(".", "_"), self.weights[name].astype(np.float32))

    def stored(self, hint: str, value: Any, channel_axis: int) -> str:
        """A large weight: a float32 constant, or int8 with a scale per channel and a DequantizeLinear."""
        g = self.g
        if not self.int8_weights:
            return g.const(hint, value)
        # Symmetric per-channel int8: scale = max |w| / 127 along each channel.
        reduce_axis = 1 - channel_axis
        scale = np.maximum(np.abs(value).max(axis=reduce_axis), np.float32(1e-12)) / np.float32(127.0)
        shaped = np.expand_dims(scale, reduce_axis)
        quantised = np.clip(np.rint(value / shaped), -127, 127).astype(np.int8)
        zero = np.zeros_like(scale, dtype=np.int8)
        return g.op(
            "DequantizeLinear",
            [
                g.const(hint + "_q", quantised),
                g.const(hint + "_scale", scale.astype(np.float32)),
                g.const(hint + "_zero", zero),
            ],
            axis=channel_axis,
        )

    def dense(self, x: str, prefix: str) -> str:
        """x · kernel + bias of the Linear layer `prefix`."""
        # torch's Linear keeps (out, in); MatMul wants (in, out).
        kernel = self.stored(
            prefix.replace(".", "_") + "_kernel", self.weights[f"{prefix}.weight"].T.copy(), 1
        )
        hint = prefix.replace(".", "_")
        return self.g.op("Add", [self.g.op("MatMul", [x, kernel], hint=hint), self.w(f"{prefix}.bias")])

    def layer_norm(self, x: str, prefix: str) -> str:
        """The LayerNorm `prefix` over the last axis."""
        return self.g.op(
            "LayerNormalization",
            [x, self.w(f"{prefix}.weight"), self.w(f"{prefix}.bias")],
            axis=-1,
            epsilon=self.eps,
        )

    def embeddings(self) -> str:
        """Word + position (0..tokens-1) + token type embeddings, then LayerNorm."""
        g = self.g
        shape = g.op("Shape", ["input_ids"])
        tokens = g.op("Gather", [shape, g.const("one", np.array([1], dtype=np.int64))], axis=0)
        positions = g.op(
            "Slice",
            [
                self.w("embeddings.position_embeddings.weight"),
                g.const("zero", np.array([0], dtype=np.int64)),
                tokens,
                g.const("axis0", np.array([0], dtype=np.int64)),
            ],
        )
        vocabulary = self.stored(
            "word_embeddings", self.weights["embeddings.word_embeddings.weight"].astype(np.float32), 0
        )
        words = g.op("Gather", [vocabulary, "input_ids"], axis=0)
        types = g.op("Gather", [self.w("embeddings.token_type_embeddings.weight"), "token_type_ids"], axis=0)
        return self.layer_norm(g.op("Add", [g.op("Add", [words, positions]), types]), "embeddings.LayerNorm")

    def attention_constants(self, mask: str) -> _Attention:
        """The padding bias of `mask` (float, batch x tokens) and the constants every layer shares."""
        g = self.g
        one = g.const("one_f", np.float32(1.0))
        padding = g.op("Sub", [one, mask])
        key_bias = g.op(
            "Unsqueeze",
            [
                g.op("Mul", [padding, g.const("float_min", np.float32(np.finfo(np.float32).min))]),
                g.const("axes12", np.array([1, 2], dtype=np.int64)),
            ],
        )
        split_heads = g.const("split_heads", np.array([0, 0, self.heads, self.head_size], dtype=np.int64))
        merge_heads = g.const("merge_heads", np.array([0, 0, self.hidden], dtype=np.int64))
        scale = g.const("scale", np.float32(1.0 / math.sqrt(self.head_size)))
        return _Attention(key_bias, split_heads, merge_heads, scale)

    def encoder_layer(self, x: str, p: str, attention: _Attention) -> str:
        """One transformer layer `p`: self-attention, then the feed-forward block, each with a residual."""
        g = self.g

        def heads_of(part: str, perm: list[int]) -> str:
            projected = self.dense(x, f"{p}attention.self.{part}")
            return g.op("Transpose", [g.op("Reshape", [projected, attention.split_heads])], perm=perm)

        q = heads_of("query", [0, 2, 1, 3])
        k = heads_of("key", [0, 2, 3, 1])
        v = heads_of("value", [0, 2, 1, 3])
        scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), attention.scale]), attention.key_bias])
        probabilities = g.op("Softmax", [scores], axis=-1)
        context = g.op("Transpose", [g.op("MatMul", [probabilities, v])], perm=[0, 2, 1, 3])
        attended = self.dense(g.op("Reshape", [context, attention.merge_heads]), f"{p}attention.output.dense")
        x = self.layer_norm(g.op("Add", [attended, x]), f"{p}attention.output.LayerNorm")
        # GELU, exact (erf) form as BERT.
        gelu = g.op("Gelu", [self.dense(x, f"{p}intermediate.dense")])
        output = self.dense(gelu, f"{p}output.dense")
        return self.layer_norm(g.op("Add", [output, x]), f"{p}output.LayerNorm")

    def sentence_embedding(self, x: str, mask: str) -> None:
        """Mean pooling over real tokens, then L2 normalisation (modules 1_Pooling and 2_Normalize)."""
        g = self.g
        token_mask = g.op("Unsqueeze", [mask, g.const("axis2", np.array([2], dtype=np.int64))])
        summed = g.op(
            "ReduceSum",
            [g.op("Mul", [x, token_mask]), g.const("axis1", np.array([1], dtype=np.int64))],
            keepdims=0,
        )
        counts = g.op("ReduceSum", [token_mask, g.const("axis1", np.array([1], dtype=np.int64))], keepdims=0)
        pooled = g.op("Div", [summed, g.op("Max", [counts, g.const("tiny", np.float32(1e-9))])])
        norm = g.op(
            "Sqrt", [g.op("ReduceSumSquare", [pooled, g.const("axis1", np.array([1], dtype=np.int64))])]
        )
        g.nodes.append(
            onnx_proto.node(
                "Div",
                [pooled, g.op("Max", [norm, g.const("eps", np.float32(1e-12))])],
                ["sentence_embedding"],
            )
        )


def quantize_int8(fp32_path: Path, int8_path: Path, **options: Any) -> None:
    """Dynamic int8 quantisation of the weight MatMuls (activations are quantised per batch).

    onnxruntime's quantiser reads and writes models with the `onnx` package, which `make serve` does not
    install: without it this raises ConfigurationError.
    """
    try:
        import onnx
    except ImportError as exc:
        raise ConfigurationError(
            "LOCAL_EMBEDDER_RUNTIME=onnx-int8 builds its model with onnxruntime's quantiser, which needs "
            "the onnx package of the 'dev' extra: make install-dev (or pip install -e '.[local,dev]'); "
            "or choose onnx or onnx-w8, or set LOCAL_MODEL_DIR to a folder holding model.int8.onnx"
        ) from exc

    from retrieval_core.embeddings.onnxruntime_env import quiet_onnxruntime

    quiet_onnxruntime()
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(fp32_path))
    constants = {tensor.name for tensor in model.graph.initializer}
    # Attention's two MatMuls multiply activations by activations: left in float32.
    activations_only = [
        node.name for node in model.graph.node if node.op_type == "MatMul" and not set(node.input) & constants
    ]
    settings = {
        "per_channel": True,
        "reduce_range": True,
        "op_types_to_quantize": ["MatMul", "Gather"],
        **options,
    }
    settings["nodes_to_exclude"] = activations_only + list(settings.get("nodes_to_exclude", []))
    quantize_dynamic(fp32_path, int8_path, weight_type=QuantType.QInt8, **settings)
