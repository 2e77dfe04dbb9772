"""What an InferenceSession reports about its model (NodeArg, ModelMetadata), and the model it
hands to onnxjit: ORT's reading of declared shapes made explicit."""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper

from .session_options import InvalidArgument, InvalidProtobuf, NoSuchFile, ort_error

NO_VERSION = 2 ** 63 - 1      # ORT's ModelMetadata.version when the model sets none


class NodeArg:
    """An input or output as ORT describes it: name, type ('tensor(float)'), shape (ints,
    dim_param strings, None for unknown dims)."""
    __slots__ = ("_name", "_type", "_shape")

    def __init__(self, name, type, shape):
        self._name, self._type, self._shape = name, type, shape

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    shape = property(lambda self: self._shape)

    def __eq__(self, other):
        return isinstance(other, NodeArg) and (self.name, self.type, self.shape) == (
            other.name, other.type, other.shape)

    def __hash__(self):
        return hash((self.name, self.type))

    def __str__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __repr__ = __str__


class ModelMetadata:
    """ORT's ModelMetadata: producer_name, graph_name, graph_description, domain, description,
    version (2**63-1 when unset, as ORT reports) and custom_metadata_map."""
    __slots__ = ("producer_name", "graph_name", "graph_description", "domain", "description",
                 "version", "custom_metadata_map")

    def __init__(self, model):
        self.producer_name = model.producer_name
        self.graph_name = model.graph.name
        self.graph_description = model.graph.doc_string
        self.domain = model.domain
        self.description = model.doc_string
        self.version = model.model_version if model.HasField("model_version") else NO_VERSION
        self.custom_metadata_map = {p.key: p.value for p in model.metadata_props}

    def __repr__(self):
        return "ModelMetadata(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


# -- types and shapes -----------------------------------------------------------------------------
def elem_name(elem_type):
    """'float' for TensorProto.FLOAT, 'int64' for INT64 ... (ORT's spelling)."""
    return TensorProto.DataType.Name(elem_type).lower()


def dtype_name(dtype):
    """'tensor(float)' for numpy float32."""
    try:
        return f"tensor({elem_name(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))})"
    except Exception:
        return f"tensor({np.dtype(dtype)})"


def type_string(tp):
    """ORT's text of an onnx TypeProto: 'tensor(float)', 'seq(tensor(int64))', 'map(int64,tensor(float))'."""
    kind = tp.WhichOneof("value")
    if kind == "tensor_type":
        return f"tensor({elem_name(tp.tensor_type.elem_type)})"
    if kind == "sparse_tensor_type":
        return f"sparse_tensor({elem_name(tp.sparse_tensor_type.elem_type)})"
    if kind == "sequence_type":
        return f"seq({type_string(tp.sequence_type.elem_type)})"
    if kind == "optional_type":
        return f"optional({type_string(tp.optional_type.elem_type)})"
    if kind == "map_type":
        return f"map({elem_name(tp.map_type.key_type)},{type_string(tp.map_type.value_type)})"
    return "unknown"


def declared_dims(tp):
    """Dims of a tensor type as ORT reads them: ints, dim_param names, None (no value, or a
    negative value such as exporters' -1); None for no shape at all."""
    kind = tp.WhichOneof("value")
    if kind not in ("tensor_type", "sparse_tensor_type"):
        return None
    tensor = getattr(tp, kind)
    if not tensor.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
            else (d.dim_param or None) for d in tensor.shape.dim]


def node_arg(value_info):
    return NodeArg(value_info.name, type_string(value_info.type),
                   declared_dims(value_info.type) or [])


def describe(model):
    """(inputs, outputs, overridable initializers) as NodeArg lists, outputs' shapes completed by
    onnx's shape inference as ORT completes them."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [node_arg(vi) for vi in model.graph.input if vi.name not in inits]
    overridable = [node_arg(vi) for vi in model.graph.input if vi.name in inits]
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph.output
    except Exception:      # inference is a courtesy here: the declared types still stand
        inferred = model.graph.output
    declared = {d for a in inputs + overridable + [node_arg(vi) for vi in model.graph.output]
                for d in a.shape if isinstance(d, str)}
    outputs = [_unnamed(node_arg(vi), declared) for vi in inferred]
    return inputs, outputs, overridable


def _unnamed(arg, declared):
    """`arg` with the dim names onnx's inference makes up ('unk__0') as None, as ORT shows them."""
    shape = [None if isinstance(d, str) and d.startswith("unk__") and d not in declared else d
             for d in arg.shape]
    return NodeArg(arg.name, arg.type, shape)


# -- loading and the model onnxjit compiles ------------------------------------------------------
def load(path_or_bytes):
    """The ModelProto of a path, serialized bytes or a ModelProto, with ORT's errors."""
    if isinstance(path_or_bytes, onnx.ModelProto):
        return path_or_bytes
    if isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        if not os.path.exists(path):
            raise ort_error(NoSuchFile, f"Load model from {path} failed:Load model {path} failed. "
                                        "File doesn't exist")
        from .errors import ModelError
        from .ir import load_model
        try:
            model = onnx.load(path, load_external_data=False)
        except Exception:
            raise ort_error(InvalidProtobuf, f"Load model from {path} failed:Protobuf parsing "
                                             "failed.") from None
        try:    # external data, if any, only from inside the model's folder (external_data.py)
            return load_model(path) if _has_external_data(model) else model
        except ModelError as exc:
            raise ort_error(InvalidProtobuf, f"Load model from {path} failed:{exc}") from None
    if isinstance(path_or_bytes, bytes):
        try:
            model = onnx.ModelProto.FromString(path_or_bytes)
        except Exception:
            model = None
        if model is None or not model.HasField("graph"):
            raise ort_error(InvalidProtobuf, "Failed to load model because protobuf parsing failed.")
        return model
    raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")


def _has_external_data(model):
    from .external_data import external_tensors
    return next(external_tensors(model), None) is not None


def runnable_model(model, free_dims=None, initializers=None, override=(), scalars=False):
    """The model onnxjit compiles for a session: negative dims dynamic (ORT reads -1 as unknown),
    free dimensions overridden, `initializers` {name: array} replaced, the initializers named in
    `override` turned into graph inputs (fed when a run overrides them) and, with `scalars`,
    declared scalars without a shape (ORT checks no shape for them: [1] and [[1]] pass as is)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for vi in out.graph.input:
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 0 and scalars:
            vi.type.tensor_type.ClearField("shape")
        for d in dims:
            if d.HasField("dim_value") and d.dim_value < 0:
                d.Clear()
            elif d.dim_param in (free_dims or {}):
                d.dim_value = free_dims[d.dim_param]
    for name, value in (initializers or {}).items():
        _replace_initializer(out.graph, name, value)
    if override:
        kept = [t for t in out.graph.initializer if t.name not in override]
        del out.graph.initializer[:]
        out.graph.initializer.extend(kept)
    return out


def _replace_initializer(graph, name, value):
    array = np.asarray(value.numpy() if hasattr(value, "numpy") else value)
    for i, t in enumerate(graph.initializer):
        if t.name == name:
            graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(array, name))
            return
    raise ort_error(InvalidArgument, f"add_initializer: the model has no initializer {name!r}")
