"""The ONNX messages `minilm_graph.py` writes, encoded as protobuf without the `onnx` package.

An ONNX file is one serialised `ModelProto` (onnx/onnx.proto, proto2). Only the subset the MiniLM graph
uses is here: tensors held as `raw_data`, nodes with int, float and int-list attributes, inputs and
outputs of int64 or float tensors with named or fixed dimensions, one opset. Fields are written in
field-number order and only when set, as the official encoder does, so the bytes are those of
`onnx.helper` + `SerializeToString` (tests/unit/test_onnx_proto.py compares them).
"""

from __future__ import annotations

import numbers
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# TensorProto.DataType
FLOAT = 1
INT8 = 3
INT64 = 7
_DATA_TYPES = {np.dtype(np.float32): FLOAT, np.dtype(np.int8): INT8, np.dtype(np.int64): INT64}

# AttributeProto.AttributeType
_ATTR_FLOAT = 1
_ATTR_INT = 2
_ATTR_INTS = 7

# Wire types.
_VARINT = 0
_FIXED32 = 5
_LENGTH = 2

AttributeValue = int | float | np.number[Any] | Sequence[int]


def _varint(value: int) -> bytes:
    # int64 fields: a negative value is its 64-bit two's complement (ten bytes).
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value)


def _bytes(field: int, payload: bytes) -> bytes:
    return _key(field, _LENGTH) + _varint(len(payload)) + payload


def _string(field: int, text: str) -> bytes:
    return _bytes(field, text.encode())


def _messages(field: int, payloads: Iterable[bytes]) -> bytes:
    return b"".join(_bytes(field, payload) for payload in payloads)


def tensor(name: str, value: Any) -> bytes:
    """A `TensorProto` holding `value` (float32, int8 or int64; any shape, a scalar included) as raw data."""
    array = np.asarray(value)
    data_type = _DATA_TYPES.get(array.dtype)
    if data_type is None:
        raise TypeError(f"tensor {name}: dtype {array.dtype} is not written by onnx_proto")
    # dims (1) is a proto2 repeated int64: not packed, one key per dimension.
    dims = b"".join(_int(1, size) for size in array.shape)
    raw = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
    return dims + _int(2, data_type) + _string(8, name) + _bytes(9, raw)


def _attribute(name: str, value: AttributeValue) -> bytes:
    # As onnx.helper.make_attribute: any integral number is an int, any other real a float.
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"attribute {name}: bool is not an ONNX attribute type")
    if isinstance(value, numbers.Integral):
        return _string(1, name) + _int(3, int(value)) + _int(20, _ATTR_INT)
    if isinstance(value, numbers.Real):
        return _string(1, name) + _key(2, _FIXED32) + struct.pack("<f", value) + _int(20, _ATTR_FLOAT)
    if not isinstance(value, Sequence):
        raise TypeError(f"attribute {name}: {type(value).__name__} is not written by onnx_proto")
    ints = b"".join(_int(8, int(item)) for item in value)
    return _string(1, name) + ints + _int(20, _ATTR_INTS)


def node(
    op_type: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    name: str | None = None,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> bytes:
    """A `NodeProto` of the default domain; attributes sorted by name, as `onnx.helper.make_node` does."""
    out = b"".join(_string(1, item) for item in inputs) + b"".join(_string(2, item) for item in outputs)
    if name:
        out += _string(3, name)
    out += _string(4, op_type)
    return out + _messages(5, (_attribute(key, value) for key, value in sorted((attributes or {}).items())))


def value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> bytes:
    """A `ValueInfoProto`: a tensor of `elem_type` whose dimensions are sizes or symbolic names."""
    dims = [_int(1, d) if isinstance(d, int) else _string(2, d) for d in shape]
    tensor_shape = _messages(1, dims)
    tensor_type = _int(1, elem_type) + _bytes(2, tensor_shape)
    return _string(1, name) + _bytes(2, _bytes(1, tensor_type))


def graph(
    name: str,
    nodes: Sequence[bytes],
    initializers: Sequence[bytes],
    inputs: Sequence[bytes],
    outputs: Sequence[bytes],
) -> bytes:
    """A `GraphProto` of encoded nodes, initializer tensors and input and output value infos."""
    return (
        _messages(1, nodes)
        + _string(2, name)
        + _messages(5, initializers)
        + _messages(11, inputs)
        + _messages(12, outputs)
    )


def model(graph: bytes, ir_version: int, opset: int, producer_name: str) -> bytes:
    """A `ModelProto`: the serialised ONNX file of `graph`, importing the default domain at `opset`."""
    opset_import = _string(1, "") + _int(2, opset)
    return _int(1, ir_version) + _string(2, producer_name) + _bytes(7, graph) + _bytes(8, opset_import)
