"""all-MiniLM-L6-v2 in numpy float32: the sentence-transformers pipeline (BERT, mean pooling,
L2 normalisation) without torch.

Only `LocalEmbedder` imports this module, on the first embedding, so numpy loads then and not at
service import.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Floats = NDArray[np.float32]
Ints = NDArray[np.int64]

# Padded tokens of one batch (rows x width), whatever EMBEDDING_BATCH_SIZE says: attention holds
# rows x heads x width x width scores per layer, and onnxruntime's arena keeps what a batch once took.
# 64 chunks of 1,000 characters (about 243 tokens each) raised the peak RSS by 1,139 MiB; capped at
# 4,096 tokens (16 such chunks) by 259 MiB, at the same chunks/s (docs/benchmarks.md, "Large
# documents"), while short passages (up to 64 tokens) still go 64 at a time. A lower cap would change
# which texts share a batch, which moves onnx-int8's vectors (one activation scale per batch) below
# their parity bar.
MAX_BATCH_TOKENS = 4096
# Texts tokenized at a time: the tokenizer's encodings of 2,048 chunks of 150 tokens take 53 MB; sorting
# by length within 256 texts leaves about as little padding as across all of them.
TOKENIZE_TEXTS = 256

# Rows (tokens) per feed-forward block: 128 x 1536 float32 intermediates are 768 KiB, within L2.
FEED_FORWARD_ROWS = 128

# GELU's tanh form. BERT uses the exact erf form; measured against it (sentence-transformers on torch,
# tests/fixtures/minilm_reference.json) the tanh form keeps every text's cosine above 0.999998 and is
# about 20% faster end to end than an erf accurate to 1e-7 (Chebyshev erfc, nine terms), which gave
# 0.9999999 (commit 9e9ccea). numpy has no erf.
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x: Floats) -> Floats:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), overwriting nothing."""
    inner = x * x
    inner *= np.float32(0.044715 * _SQRT_2_OVER_PI)
    inner += np.float32(_SQRT_2_OVER_PI)
    inner *= x
    np.tanh(inner, out=inner)
    inner += np.float32(1.0)
    inner *= x
    inner *= np.float32(0.5)
    return inner


def layer_norm(x: Floats, weight: Floats, bias: Floats, eps: float) -> Floats:
    """LayerNorm over the last axis."""
    mean = x.mean(axis=-1, keepdims=True)
    centered: Floats = x - mean
    variance = np.mean(centered * centered, axis=-1, keepdims=True)
    centered /= np.sqrt(variance + np.float32(eps))
    centered *= weight
    centered += bias
    return centered


def softmax_inplace(scores: Floats) -> None:
    """Softmax over the last axis, overwriting `scores`."""
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class EncoderLayer:
    """One transformer layer's weights, transposed to (in, out) so that `x @ w` is the dense layer."""

    qkv_weight: Floats  # query, key and value fused: one matmul instead of three
    qkv_bias: Floats
    attention_out_weight: Floats
    attention_out_bias: Floats
    attention_norm_weight: Floats
    attention_norm_bias: Floats
    intermediate_weight: Floats
    intermediate_bias: Floats
    output_weight: Floats
    output_bias: Floats
    output_norm_weight: Floats
    output_norm_bias: Floats


class TokenBatchEncoder:
    """all-MiniLM-L6-v2's tokenizer and batching; a subclass embeds one padded batch (`_embed_batch`)."""

    def __init__(
        self,
        model_dir: Path,
        batch_size: int = 64,
        sort_by_length: bool = True,
        max_batch_tokens: int = MAX_BATCH_TOKENS,
    ) -> None:
        self.config = config = json.loads((model_dir / "config.json").read_text())
        self.max_seq_length = int(
            json.loads((model_dir / "sentence_bert_config.json").read_text())["max_seq_length"]
        )
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{model_dir} does not use mean pooling")
        self.batch_size = batch_size
        self.max_batch_tokens = max_batch_tokens
        self.sort_by_length = sort_by_length
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        self.tokenizer = _load_tokenizer(model_dir / "tokenizer.json", self.max_seq_length)

    def encode(self, texts: Sequence[str]) -> Floats:
        """Unit-length embeddings, one row per text, in the order given."""
        result = np.zeros((len(texts), self.hidden), dtype=np.float32)
        for start in range(0, len(texts), TOKENIZE_TEXTS):
            window = list(texts[start : start + TOKENIZE_TEXTS])
            result[start : start + len(window)] = self._encode_window(window)
        return result

    def _encode_window(self, texts: list[str]) -> Floats:
        result = np.zeros((len(texts), self.hidden), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        lengths = [len(e.ids) for e in encodings]
        order = list(range(len(texts)))
        if self.sort_by_length:
            # Texts of similar length share a batch, so little of each batch is padding.
            order.sort(key=lambda i: -lengths[i])
        for chosen in token_batches(order, lengths, self.batch_size, self.max_batch_tokens):
            width = max(lengths[i] for i in chosen)
            ids = np.zeros((len(chosen), width), dtype=np.int64)
            types = np.zeros((len(chosen), width), dtype=np.int64)
            mask = np.zeros((len(chosen), width), dtype=np.int64)
            for row, i in enumerate(chosen):
                ids[row, : lengths[i]] = encodings[i].ids
                types[row, : lengths[i]] = encodings[i].type_ids
                mask[row, : lengths[i]] = 1
            result[chosen] = self._embed_batch(ids, types, mask)
        return result

    def _embed_batch(self, ids: Ints, types: Ints, mask: Ints) -> Floats:
        """Unit-length sentence embeddings of one padded batch (mask: 1 for real tokens, 0 for padding)."""
        raise NotImplementedError


def token_batches(order: list[int], lengths: list[int], rows: int, tokens: int) -> Iterator[list[int]]:
    """`order` cut into consecutive batches of at most `rows` texts whose padded size (rows x the longest
    text's tokens) stays within `tokens`; a text longer than `tokens` goes alone."""
    batch: list[int] = []
    width = 0
    for i in order:
        wider = max(width, lengths[i])
        if batch and (len(batch) == rows or (len(batch) + 1) * wider > tokens):
            yield batch
            batch, wider = [], lengths[i]
        batch.append(i)
        width = wider
    if batch:
        yield batch


class MiniLMEncoder(TokenBatchEncoder):
    """The BERT encoder of all-MiniLM-L6-v2 plus its sentence-transformers head, in numpy float32."""

    def __init__(self, model_dir: Path, batch_size: int = 64, sort_by_length: bool = True) -> None:
        from safetensors.numpy import load_file

        super().__init__(model_dir, batch_size, sort_by_length)
        config = self.config
        weights = load_file(str(model_dir / "model.safetensors"))

        def get(name: str) -> Floats:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def dense(name: str) -> Floats:
            return np.ascontiguousarray(weights[f"{name}.weight"].T, dtype=np.float32)

        self.word_embeddings = get("embeddings.word_embeddings.weight")
        self.position_embeddings = get("embeddings.position_embeddings.weight")
        self.token_type_embeddings = get("embeddings.token_type_embeddings.weight")
        self.embedding_norm = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self.layers: list[EncoderLayer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            attention = p + "attention.self."
            self.layers.append(
                EncoderLayer(
                    qkv_weight=np.concatenate(
                        [dense(attention + part) for part in ("query", "key", "value")], axis=1
                    ),
                    qkv_bias=np.concatenate(
                        [get(f"{attention}{part}.bias") for part in ("query", "key", "value")]
                    ),
                    attention_out_weight=dense(p + "attention.output.dense"),
                    attention_out_bias=get(p + "attention.output.dense.bias"),
                    attention_norm_weight=get(p + "attention.output.LayerNorm.weight"),
                    attention_norm_bias=get(p + "attention.output.LayerNorm.bias"),
                    intermediate_weight=dense(p + "intermediate.dense"),
                    intermediate_bias=get(p + "intermediate.dense.bias"),
                    output_weight=dense(p + "output.dense"),
                    output_bias=get(p + "output.dense.bias"),
                    output_norm_weight=get(p + "output.LayerNorm.weight"),
                    output_norm_bias=get(p + "output.LayerNorm.bias"),
                )
            )

    def _embed_batch(self, ids: Ints, types: Ints, mask: Ints) -> Floats:
        real = mask.astype(np.float32)
        hidden = self.forward(ids, types, real)
        # Mean pooling over real tokens, then L2 normalisation (modules 1_Pooling and 2_Normalize).
        summed = (hidden * real[:, :, None]).sum(axis=1)
        pooled: Floats = summed / np.maximum(real.sum(axis=1, keepdims=True), np.float32(1e-9))
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        pooled /= np.maximum(norms, np.float32(1e-12))
        return pooled

    def forward(self, ids: Ints, types: Ints, mask: Floats) -> Floats:
        """The encoder's last hidden state, (batch, tokens, hidden)."""
        batch, width = ids.shape
        x = self.word_embeddings[ids] + self.position_embeddings[:width] + self.token_type_embeddings[types]
        x = layer_norm(x.reshape(batch * width, self.hidden), *self.embedding_norm, self.eps)
        # Additive attention mask: padding keys get the most negative float, as in transformers.
        key_bias = (np.float32(1.0) - mask) * np.finfo(np.float32).min
        for layer in self.layers:
            qkv = x @ layer.qkv_weight + layer.qkv_bias
            context = self._attention(qkv.reshape(batch, width, 3 * self.hidden), key_bias)
            attended = context @ layer.attention_out_weight + layer.attention_out_bias
            attended += x
            x = layer_norm(attended, layer.attention_norm_weight, layer.attention_norm_bias, self.eps)
            x = self._feed_forward(x, layer)
        return x.reshape(batch, width, self.hidden)

    def _attention(self, qkv: Floats, key_bias: Floats) -> Floats:
        """Multi-head self-attention, one sequence at a time: its (heads, tokens, tokens) scores stay
        in cache, where a whole batch's would not."""
        batch, width, _ = qkv.shape
        heads, head_size = self.heads, self.hidden // self.heads
        scale = np.float32(1.0 / math.sqrt(head_size))
        context = np.empty((batch, width, self.hidden), dtype=np.float32)
        for row in range(batch):
            q, k, v = qkv[row].reshape(width, 3, heads, head_size).transpose(1, 2, 0, 3)
            scores = (q * scale) @ k.transpose(0, 2, 1)
            scores += key_bias[row]
            softmax_inplace(scores)
            context[row] = (scores @ v).transpose(1, 0, 2).reshape(width, self.hidden)
        return context.reshape(batch * width, self.hidden)

    def _feed_forward(self, x: Floats, layer: EncoderLayer) -> Floats:
        """Intermediate dense, GELU, output dense, residual and LayerNorm, in blocks of rows so that the
        4x wider intermediate activations stay in cache through GELU's elementwise passes."""
        out = np.empty_like(x)
        for start in range(0, x.shape[0], FEED_FORWARD_ROWS):
            block = x[start : start + FEED_FORWARD_ROWS]
            intermediate = gelu(block @ layer.intermediate_weight + layer.intermediate_bias)
            output = intermediate @ layer.output_weight + layer.output_bias
            output += block
            out[start : start + FEED_FORWARD_ROWS] = layer_norm(
                output, layer.output_norm_weight, layer.output_norm_bias, self.eps
            )
        return out


def _load_tokenizer(path: Path, max_length: int) -> Tokenizer:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # tokenizer.json ships truncation and fixed padding at 128; the model reads up to max_seq_length
    # tokens, and `encode` pads each batch to its own longest text.
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    return tokenizer
