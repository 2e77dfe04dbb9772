"""The intermediate representation: values with concrete shapes and dtypes, and model loading."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .errors import ModelError

# ONNX element types Numba can hold as arrays.
NUMBA_DTYPES = {
    np.dtype(t) for t in (
        np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
        np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)
}


def _narrow_floats():
    import ml_dtypes
    return {np.dtype(np.float16): "round_f16", np.dtype(ml_dtypes.bfloat16): "round_bf16"}


# Floats Numba cannot hold: stored in float32 arrays inside compiled code, every elementwise
# result rounded to the narrow type (kernels/scalar.py), converted at the graph's edges.
NARROW_FLOATS = _narrow_floats()


def _bit_types():
    import ml_dtypes
    names = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
             "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4", "int2", "uint2")
    return {np.dtype(getattr(ml_dtypes, n)): n for n in names if hasattr(ml_dtypes, n)}


# Types held as their bit patterns, one element per uint8 (4- and 2-bit ones in the low bits, as
# ml_dtypes stores them): compiled code only moves them or converts them (kernels/narrow.py);
# the graph's edges view them as uint8 and back. Only the ops in BIT_OPS read or make them.
BIT_TYPES = _bit_types()
BIT_OPS = frozenset((
    "Cast", "CastLike", "QuantizeLinear", "DequantizeLinear", "Identity", "Reshape", "Flatten",
    "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather", "Expand", "Tile",
    "Pad", "Constant", "ConstantOfShape", "Shape", "Size"))
COMPILABLE_DTYPES = NUMBA_DTYPES | set(NARROW_FLOATS) | set(BIT_TYPES)


def compute_dtype(dtype):
    """The dtype compiled code holds a value of `dtype` in."""
    dtype = np.dtype(dtype)
    if dtype in NARROW_FLOATS:
        return np.dtype(np.float32)
    return np.dtype(np.uint8) if dtype in BIT_TYPES else dtype


def held(array, dtype=None):
    """`array` (of `dtype`, default its own) as compiled code holds it: narrow floats widened to
    float32, bit-held types viewed as uint8; other arrays unchanged."""
    array = np.asarray(array)
    dtype = np.dtype(dtype or array.dtype)
    if dtype in BIT_TYPES:
        return np.asarray(array, dtype).view(np.uint8)
    return array.astype(compute_dtype(dtype), copy=False)


@dataclass(eq=False)
class Value:
    """A tensor in the specialized graph: concrete shape and dtype, and its value when folded."""
    shape: tuple
    dtype: np.dtype
    const: np.ndarray | None = None
    name: str = ""            # the ONNX name, for messages and comments only
    var: str | None = None     # identifier in generated source, set by the emitter
    producer: object = None    # the Step that computes it (None for inputs and constants)

    @property
    def rank(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_const(self):
        return self.const is not None

    def __repr__(self):
        kind = "const " if self.is_const else ""
        return f"Value({kind}{self.name or '?'}: {self.dtype}{list(self.shape)})"


def const_value(array, name=""):
    """A folded Value holding `array`."""
    array = np.asarray(array)
    return Value(tuple(int(d) for d in array.shape), array.dtype, array, name)


_IDENT = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name, prefix="v"):
    """A Python identifier made from a model-supplied name (never trusted as source)."""
    ident = _IDENT.sub("_", str(name))[:40]
    if not ident or not (ident[0].isalpha() or ident[0] == "_"):
        ident = f"{prefix}_{ident}"
    return ident


class NameTable:
    """Hands out unique sanitized identifiers."""

    def __init__(self, reserved=()):
        self.used = set(reserved)

    def fresh(self, name, prefix="v"):
        base = sanitize(name, prefix)
        ident, n = base, 1
        while ident in self.used or ident.startswith("__") or _is_keyword(ident):
            ident = f"{base}_{n}"
            n += 1
        self.used.add(ident)
        return ident


def _is_keyword(ident):
    import keyword
    return keyword.iskeyword(ident) or keyword.issoftkeyword(ident) or ident in dir(__builtins__)


def load_model(model) -> onnx.ModelProto:
    """A ModelProto from a ModelProto, serialized bytes, or a path; clear error otherwise.

    External data is read only from inside a path's folder; a model given as bytes or a
    ModelProto must hold its tensors itself (external_data.py)."""
    from .external_data import load_external_data, refuse_external_data
    if isinstance(model, onnx.ModelProto):
        refuse_external_data(model)
        return model
    if isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(model)
        refuse_external_data(proto)
        return proto
    if isinstance(model, (str, os.PathLike)):
        if not os.path.isfile(model):
            raise ModelError(f"no ONNX model file at {os.fspath(model)!r}")
        with open(model, "rb") as f:
            proto = _parse(f.read())
        load_external_data(proto, os.path.dirname(os.path.abspath(model)))
        return proto
    raise ModelError(f"expected an onnx.ModelProto, bytes or a path, got {type(model).__name__}")


def _parse(data):
    try:
        proto = onnx.ModelProto.FromString(bytes(data))
    except Exception as exc:  # protobuf raises DecodeError or RuntimeWarning-ish errors
        raise ModelError(f"could not parse the bytes as an ONNX model: {exc}") from None
    if not proto.HasField("graph"):
        raise ModelError("could not parse the bytes as an ONNX model: no graph in it")
    return proto


def tensor_array(tensor, what="tensor"):
    """numpy array of a TensorProto held in the model; never read from an external file here
    (numpy_helper would read it relative to the working directory: see external_data.py)."""
    from .external_data import location, uses_external_data
    if uses_external_data(tensor):
        raise ModelError(f"{what} {tensor.name!r} keeps its data in an external file "
                         f"({location(tensor)!r}) that was not loaded: prepare the model from "
                         f"its path, or load it with onnx.load(path)")
    return numpy_helper.to_array(tensor)


def opset_of(model: onnx.ModelProto, domain=""):
    """The model's opset version for `domain` ('' and 'ai.onnx' are the same domain)."""
    for entry in model.opset_import:
        if (entry.domain or "") in (domain, "ai.onnx" if domain == "" else domain):
            return entry.version
    return None


def tensor_dtype(elem_type):
    """numpy dtype of an ONNX element type, or None when numpy has no such type."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None


@dataclass
class InputSpec:
    """A graph input as declared: name, dtype (or None), dims (int, str or None each)."""
    name: str
    elem_type: int
    dims: tuple | None

    @property
    def dtype(self):
        return tensor_dtype(self.elem_type)

    def is_static(self):
        return self.dims is not None and all(isinstance(d, int) for d in self.dims)


def input_specs(graph, initializer_names):
    """The graph's real inputs (those without an initializer)."""
    specs = []
    for vi in graph.input:
        if vi.name in initializer_names:
            continue
        tt = vi.type.tensor_type
        dims = None
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            # a negative dim_value (-1, as Paddle2ONNX writes it) is dynamic, as ORT reads it
            dims = tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                         else (d.dim_param or None) for d in tt.shape.dim)
        specs.append(InputSpec(vi.name, tt.elem_type if vi.type.HasField("tensor_type") else 0, dims))
    return specs


def initializers(graph):
    """{name: numpy array} of the graph's initializers."""
    out = {}
    for t in graph.initializer:
        try:
            out[t.name] = tensor_array(t, "initializer")
        except ModelError:
            raise
        except Exception as exc:
            raise ModelError(f"initializer {t.name!r} cannot be read: {exc}") from None
    return out


def attributes(node):
    """{name: python value} of a node's attributes, strings decoded."""
    out = {}
    for attr in node.attribute:
        value = helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", "replace") for v in value]
        elif isinstance(value, onnx.TensorProto):
            value = tensor_array(
                value, f"node {node.name or node.op_type!r}, attribute {attr.name!r}: tensor")
        out[attr.name] = value
    return out
