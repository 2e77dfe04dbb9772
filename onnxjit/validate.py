"""Checks at prepare, before any code is generated: structure, types, attribute values, sizes.

`check_model` runs from backend.prepare. It refuses, with a ModelError naming the node:
- a node whose input/output counts or attribute types break its schema (onnx.checker.check_node);
- inputs breaking an op's type constraints (a float64 weight on a float32 Conv, mixed float32 and
  float64 under one constraint), axes out of range, shapes that cannot meet (onnx's strict shape
  and type inference, with data propagation);
- attribute values outside their allowed set (Mod's fmod = 2, AffineGrid's align_corners = 7);
- subgraphs nested deeper than the nesting limit;
- a value whose inferred static shape has more elements than the element limit (a few-byte
  model asking for a 1e12-element ConstantOfShape, Expand, Tile, Range or Resize).

The limits (LimitError): `max_elements` (prepare option, else ONNXJIT_MAX_ELEMENTS, default 2**31)
elements in any one tensor, checked at prepare on inferred shapes and again while a signature is
specialized (`check_outputs`, `check_fold`: shapes that only a run's inputs fix); `max_nesting`
(prepare option, else ONNXJIT_MAX_NESTING, default 16) levels of subgraphs.
"""
from __future__ import annotations

import contextvars
import os
import re

import numpy as np
import onnx
from onnx import checker, defs, shape_inference

from .errors import LimitError, LoweringError, ModelError

DEFAULT_MAX_ELEMENTS = 2 ** 31
DEFAULT_MAX_NESTING = 16

# The element limit while a rep specializes a signature (set by backend.OnnxJitRep._compile).
_current_limit = contextvars.ContextVar("onnxjit_max_elements", default=None)

# Integer attributes the spec allows only 0 or 1 for (their name, on any default-domain op whose
# schema has it as an INT), and a few with other fixed sets.
_FLAGS = {
    "fmod", "align_corners", "keepdims", "noop_with_empty_axes", "ceil_mode", "count_include_pad",
    "transA", "transB", "select_last_index", "input_forget", "output_sequence", "training_mode",
    "allowzero", "onesided", "sorted", "largest", "upper", "exclude_outside", "antialias",
    "exclusive", "reverse", "is_causal", "detect_negative", "detect_positive",
    "linear_before_reset", "new_axis", "center_point_box", "storage_order", "inverse",
    "interleaved", "saturate", "layout",
}
_ALLOWED = {("LpNormalization", "p"): (1, 2), ("ReverseSequence", "batch_axis"): (0, 1),
            ("ReverseSequence", "time_axis"): (0, 1)}


def limit(name, option=None):
    """The limit `name` ("elements" or "nesting"): the prepare option, else the environment."""
    if option is not None:
        value = option
    else:
        env, default = {"elements": ("ONNXJIT_MAX_ELEMENTS", DEFAULT_MAX_ELEMENTS),
                        "nesting": ("ONNXJIT_MAX_NESTING", DEFAULT_MAX_NESTING)}[name]
        raw = os.environ.get(env)
        if not raw:
            return default
        try:
            value = int(float(raw))
        except ValueError:
            raise ValueError(f"{env}={raw!r}: expected a whole number") from None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"max_{name}={value!r}: expected a positive whole number")
    return int(value)


def check_model(model, max_elements=None, max_nesting=None):
    """Refuse (ModelError / LimitError naming the node) what onnxjit must not generate code for."""
    max_elements = limit("elements", max_elements)
    _check_nesting(model.graph, limit("nesting", max_nesting), 0)
    opsets = {(e.domain or ""): e.version for e in model.opset_import}
    _check_nodes(model, opsets)
    inferred = _check_inference(model)
    _check_reduce_axes(model, inferred)
    if inferred is not None:
        _check_inferred_sizes(inferred, max_elements)
        _check_attention(inferred)


# -- nesting ------------------------------------------------------------------------------------
def _subgraphs(node):
    for attr in node.attribute:
        if attr.HasField("g"):
            yield attr.g
        yield from attr.graphs


def _check_nesting(graph, most, depth):
    for node in graph.node:
        for sub in _subgraphs(node):
            if depth + 1 > most:
                raise LimitError(f"{node.op_type} node {node.name!r}: subgraphs nest deeper than "
                                 f"{most} levels (the limit: prepare(max_nesting=...) or "
                                 "ONNXJIT_MAX_NESTING)")
            _check_nesting(sub, most, depth + 1)


# -- per node: schema, attribute values ----------------------------------------------------------
def _describe(node):
    return f"{node.op_type} node {node.name!r}"


def _check_nodes(model, opsets):
    ctx = checker.C.CheckerContext()
    ctx.ir_version = model.ir_version or onnx.IR_VERSION
    ctx.opset_imports = dict(opsets)
    for node in _all_nodes(model.graph):
        domain = node.domain or ""
        if domain in ("", "ai.onnx"):
            _check_schema(node, opsets, ctx)
            _check_values(node, opsets)
            _check_before_inference(node)


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for sub in _subgraphs(node):
            yield from _all_nodes(sub)


def _schema(node, opsets):
    version = opsets.get(node.domain or "", opsets.get("ai.onnx"))
    try:
        return defs.get_schema(node.op_type, version, node.domain or "")
    except Exception:
        return None


def _check_schema(node, opsets, ctx):
    schema = _schema(node, opsets)
    if schema is None:
        return
    n_in = len(node.input)
    n_out = len(node.output)
    if not schema.min_input <= n_in <= schema.max_input:
        raise ModelError(f"{_describe(node)}: {n_in} input(s), but {node.op_type}-"
                         f"{schema.since_version} takes {schema.min_input} to {schema.max_input}")
    if not schema.min_output <= n_out <= schema.max_output:
        raise ModelError(f"{_describe(node)}: {n_out} output(s), but {node.op_type}-"
                         f"{schema.since_version} gives {schema.min_output} to {schema.max_output}")
    # Attribute types, required attributes and the rest of the schema's own checks; a node with
    # subgraphs is left to shape inference (its bodies read names of the enclosing scope).
    if any(True for _ in _subgraphs(node)):
        return
    try:
        checker.check_node(node, ctx)
    except (checker.ValidationError, TypeError) as exc:
        raise ModelError(f"{_describe(node)}: {_first_line(exc)}") from None


def _check_values(node, opsets):
    schema = _schema(node, opsets)
    if schema is None:
        return
    for attr in node.attribute:
        if attr.type != onnx.AttributeProto.INT:
            continue
        declared = schema.attributes.get(attr.name)
        if declared is None or declared.type != defs.OpSchema.AttrType.INT:
            continue
        allowed = _ALLOWED.get((node.op_type, attr.name))
        if allowed is None and attr.name in _FLAGS:
            allowed = (0, 1)
        if allowed is not None and attr.i not in allowed:
            raise ModelError(f"{_describe(node)}: attribute {attr.name}={attr.i}, but "
                             f"{node.op_type} allows only {' or '.join(map(str, allowed))}")


def _check_before_inference(node):
    """What onnx's own shape inference does not survive (it aborts the process); ConvTranspose's
    output_padding (_check_output_padding)."""
    if node.op_type == "ConvTranspose":
        _check_output_padding(node)
    if node.op_type == "Split":
        n = next((a.i for a in node.attribute if a.name == "num_outputs"), None)
        if n is not None and (n != len(node.output) or n < 1):
            raise ModelError(f"{_describe(node)}: num_outputs={n}, but the node has "
                             f"{len(node.output)} output(s)")
        if n is not None and len(node.input) > 1 and node.input[1]:
            raise ModelError(f"{_describe(node)}: both num_outputs and the split input are given")


def _check_output_padding(node):
    """ConvTranspose's output_padding must be less than max(stride, dilation) per spatial dim
    (ONNX Runtime's rule, with or without output_shape; the reference refuses it where no
    output_shape is given): a larger one added zero rows of onnxjit's own meaning."""
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    pads = list(attrs.get("output_padding") or ())
    if not pads:
        return
    strides = list(attrs.get("strides") or [1] * len(pads))
    dilations = list(attrs.get("dilations") or [1] * len(pads))
    if not len(strides) == len(dilations) == len(pads):
        raise ModelError(f"{_describe(node)}: output_padding {pads}, strides {strides} and "
                         f"dilations {dilations} must have one value per spatial dim")
    for i, (p, s, d) in enumerate(zip(pads, strides, dilations)):
        if not 0 <= p < max(s, d):
            raise ModelError(f"{_describe(node)}: output_padding[{i}] = {p} must be at least 0 "
                             f"and less than max(stride, dilation) = {max(s, d)}")


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


# -- strict shape and type inference --------------------------------------------------------------
_OP = re.compile(r"\(op_type:([A-Za-z0-9_]+)(?:, node name: ([^)]*))?\)")


_LARGE = 4096   # initializers with more elements than this are weights, not shape data


def _without_large_weights(model):
    """`model` with its large initializers turned into typed graph inputs of their shape (a
    copy): inference reads their types and shapes, not their bytes, and a CNN's 100 MB of
    weights cost 0.4 s of serializing at every prepare. Small ones stay: data propagation
    reads shape-like constants."""
    graph = model.graph
    if not any(_elements(t) > _LARGE for t in graph.initializer):
        return model
    light = onnx.ModelProto()
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version"):
        setattr(light, field, getattr(model, field))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g = light.graph
    g.name = graph.name
    g.node.extend(graph.node)
    g.input.extend(graph.input)
    g.output.extend(graph.output)
    g.value_info.extend(graph.value_info)
    g.sparse_initializer.extend(graph.sparse_initializer)
    inputs = {i.name for i in graph.input}
    for t in graph.initializer:
        if _elements(t) > _LARGE:
            if t.name not in inputs:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
        else:
            g.initializer.append(t)
    return light


def _elements(tensor):
    n = 1
    for d in tensor.dims:
        n *= d
    return n


def _check_inference(model):
    """The model after onnx's strict shape/type inference (None where it cannot run); refuses
    what inference finds wrong, naming the node."""
    graph = model.graph
    if any(not i.type.HasField("tensor_type") or not i.type.tensor_type.elem_type
           for i in graph.input):
        return None    # untyped inputs: types are known only per signature
    try:
        return shape_inference.infer_shapes(_without_large_weights(model), check_type=True,
                                            strict_mode=True, data_prop=True)
    except shape_inference.InferenceError as exc:
        message = str(exc)
    except (ValueError, onnx.onnx_cpp2py_export.checker.ValidationError):
        return None    # larger than protobuf's 2 GiB, or not something inference reads
    ops = _OP.findall(message)
    if len(ops) > 1 and _is_function(ops[0][0], model):
        # An error inside onnx's own function body of an op (MeanVarianceNormalization's):
        # onnx's expansion, not the model, is at fault.
        return None
    detail = re.sub(r"\[(Shape|Type)InferenceError\]\s*", "", message.strip())
    detail = re.sub(r"^Inference error\(s\):\s*", "", detail).strip().splitlines()[0][:400]
    detail = _OP.sub("", detail).lstrip(": ").strip()
    node = _node_of(model, ops[0]) if ops else None
    if node is not None and node.op_type == "Resize" and "sizes" in detail and "scales" in detail:
        # scales (or sizes) fed as an empty run-time tensor, as opset 11-12 models leave one out:
        # inference counts it as given; the lowering checks the values it gets
        return None
    where = _describe(node) if node is not None else "the model"
    raise ModelError(f"{where}: {detail} (onnx shape and type inference)")


def _is_function(op_type, model):
    opsets = {(e.domain or ""): e.version for e in model.opset_import}
    for node in _all_nodes(model.graph):
        if node.op_type == op_type:
            schema = _schema(node, opsets)
            return schema is not None and (schema.has_function
                                           or schema.has_context_dependent_function)
    return False


def _node_of(model, found):
    op_type, name = found
    candidates = [n for n in _all_nodes(model.graph) if n.op_type == op_type]
    named = [n for n in candidates if name and n.name == name.strip()]
    return (named or candidates or [None])[0]


def _static_size(type_proto):
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return None
    size = 1
    for d in type_proto.tensor_type.shape.dim:
        if not d.HasField("dim_value"):
            return None
        size *= max(d.dim_value, 0)
    return size


def _check_inferred_sizes(inferred, most):
    graph = inferred.graph
    producer = {o: n for n in graph.node for o in n.output}
    for info in list(graph.value_info) + list(graph.output):
        size = _static_size(info.type)
        if size is not None and size > most:
            node = producer.get(info.name)
            where = _describe(node) if node is not None else f"graph output {info.name!r}"
            raise LimitError(_too_large(where, info.name, size, most))


def _too_large(where, name, size, most):
    return (f"{where}: {name!r} would hold {size:,} elements, over the limit of {most:,} "
            "(prepare(max_elements=...) or ONNXJIT_MAX_ELEMENTS)")


# -- while a signature is specialized (specialize.lower_node) -------------------------------------
def current_limit():
    value = _current_limit.get()
    return value if value is not None else limit("elements")


def check_fold(node, inputs, model_opsets):
    """Before a node with constant inputs is folded or lowered (either may allocate at compile
    time: a folded value, an index map): refuse it when its outputs would be over the element
    limit (shapes from onnx's inference of the node alone, the small constants as data). Also
    the shape rules onnx's inference leaves alone that need the signature's shapes
    (_SHAPE_RULES)."""
    rule = _SHAPE_RULES.get(node.op_type)
    if rule is not None and (node.domain or "") in ("", "ai.onnx"):
        rule(node, inputs)
    if not any(v is not None and v.is_const for v in inputs) or any(True for _ in _subgraphs(node)):
        return
    schema = _schema(node, model_opsets)
    if schema is None:
        return
    types, data = {}, {}
    for name, value in zip(node.input, inputs):
        if not name or value is None:
            continue
        try:
            elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
        except Exception:
            return
        types[name] = onnx.helper.make_tensor_type_proto(elem, value.shape)
        if value.is_const and value.size <= 64:
            data[name] = onnx.numpy_helper.from_array(np.asarray(value.const), name)
    try:
        outs = shape_inference.infer_node_outputs(schema, node, types, data)
    except Exception:
        return
    most = current_limit()
    for name, proto in outs.items():
        size = _static_size(proto)
        if size is not None and size > most:
            raise LimitError(_too_large(_describe(node), name, size, most))


def _check_conv_transpose(node, inputs):
    """An explicit output_shape must be one the input could come from: per spatial dim at most
    stride - 1 past the full output s*(in-1) + (k-1)*d + 1, whatever the output_padding (ONNX
    Runtime's rule, checked on every size; the reference refuses these too). onnxjit padded the
    end instead."""
    if len(inputs) < 2 or inputs[0] is None or inputs[1] is None:
        return
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    x, w = tuple(inputs[0].shape), tuple(inputs[1].shape)
    k = len(x) - 2
    out = list(attrs.get("output_shape") or ())[-k:] if k > 0 else []
    if not out or len(out) != k or len(w) != len(x):
        return
    kernel = list(attrs.get("kernel_shape") or w[2:])
    strides = list(attrs.get("strides") or [1] * k)
    dilations = list(attrs.get("dilations") or [1] * k)
    if not len(kernel) == len(strides) == len(dilations) == k:
        return
    for i in range(k):
        full = strides[i] * (int(x[2 + i]) - 1) + (int(kernel[i]) - 1) * dilations[i] + 1
        if int(out[i]) - full >= strides[i]:
            raise ModelError(f"{_describe(node)}: output_shape {list(out)} is inconsistent with "
                             f"the input's spatial dims {list(x[2:])}: dim {i} can be at most "
                             f"{full + strides[i] - 1} (stride {strides[i]}, kernel "
                             f"{kernel[i]}, dilation {dilations[i]})")


def _check_pool(node, inputs):
    """A pool with auto_pad SAME_UPPER / SAME_LOWER over an input with a spatial dim of 0: the
    output dim ceil(0 / stride) = 0 is an empty window grid: ONNX Runtime refuses it for every
    pool ('Only N can be zero'), the reference for MaxPool ('output shape cannot be null or
    negative'); onnxjit answered an empty tensor."""
    if not inputs or inputs[0] is None:
        return
    auto_pad = next((a.s for a in node.attribute if a.name == "auto_pad"), b"NOTSET")
    if auto_pad not in (b"SAME_UPPER", b"SAME_LOWER"):
        return
    spatial = [int(d) for d in tuple(inputs[0].shape)[2:]]
    if 0 in spatial:
        raise ModelError(f"{_describe(node)}: auto_pad {auto_pad.decode()} over an input with a "
                         f"spatial dim of 0 (spatial dims {spatial}) gives no output window")


def _check_attention_q(node, inputs):
    """Attention's Q sequence length must be greater than 0 (ONNX Runtime's rule, for 3-D and
    4-D Q; the reference fails on a 3-D one): seed 7 case 1400, Q float[2, 0, 24], answered."""
    if not inputs or inputs[0] is None:
        return
    q = tuple(int(d) for d in inputs[0].shape)
    if len(q) in (3, 4) and q[len(q) - 2] == 0:
        raise ModelError(f"{_describe(node)}: Q {list(q)} has a sequence length of 0; it must "
                         "be greater than 0")


_SHAPE_RULES = {"ConvTranspose": _check_conv_transpose, "MaxPool": _check_pool,
                "AveragePool": _check_pool, "LpPool": _check_pool,
                "Attention": _check_attention_q}


def check_outputs(node, outputs):
    """After a node is lowered or folded: refuse outputs over the element limit."""
    for name, value in zip(node.output, outputs):
        shape = getattr(value, "shape", None)
        if shape is None:
            continue
        if any(int(d) < 0 for d in shape):
            raise LoweringError(f"{_describe(node)}: {name!r} would have the negative "
                                f"dimension(s) of shape {[int(d) for d in shape]}")
        check_shape(node, name, shape)


def check_shape(node, name, shape):
    """Refuse (LimitError) a shape over the element limit, or with one dimension over it even
    where another is 0 (numpy cannot make an empty [2**63-1, 0] array: 'array is too big')."""
    most = current_limit()
    size = 1
    for d in shape:
        size *= int(d)
    if size > most:
        raise LimitError(_too_large(_describe(node), name, size, most))
    big = [int(d) for d in shape if int(d) > most]
    if big:
        raise LimitError(f"{_describe(node)}: {name!r} would have shape {[int(d) for d in shape]}"
                         f", a dimension of {big[0]:,} over the limit of {most:,} "
                         "(prepare(max_elements=...) or ONNXJIT_MAX_ELEMENTS)")



# -- structure onnx's inference leaves alone ------------------------------------------------------
def _known_shapes(graph):
    """{name: [dim or None]} of the values whose rank is known."""
    shapes = {t.name: list(t.dims) for t in graph.initializer}
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = info.type.tensor_type if info.type.HasField("tensor_type") else None
        if t is not None and t.HasField("shape"):
            shapes[info.name] = [d.dim_value if d.HasField("dim_value") else None
                                 for d in t.shape.dim]
    return shapes


def _check_reduce_axes(model, inferred):
    """A Reduce* node whose static axes (attribute, initializer or Constant) name an axis twice
    after normalization (-1 and r-1): the reduction is numpy's, which refuses it, as onnx's
    reference evaluator does (ops/reduce._norm_axes checks the axes known only at run time)."""
    graph = model.graph
    consts = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = n.attribute[0].t
    shapes = _known_shapes(inferred.graph) if inferred is not None else {}
    for node in graph.node:
        if not node.op_type.startswith("Reduce") or (node.domain or "") not in ("", "ai.onnx"):
            continue
        axes = next((list(a.ints) for a in node.attribute if a.name == "axes"), None)
        if axes is None and len(node.input) > 1 and node.input[1] in consts:
            axes = [int(v) for v in onnx.numpy_helper.to_array(consts[node.input[1]]).ravel()]
        if not axes:
            continue
        rank = len(shapes[node.input[0]]) if node.input[0] in shapes else None
        seen = set()
        for a in axes:
            a = a + rank if rank is not None and a < 0 else a
            if a in seen:
                raise ModelError(f"{_describe(node)}: axes {axes} name axis {a} more than once "
                                 "(a reduction's axes must be distinct, as numpy's)")
            seen.add(a)


def _check_attention(inferred):
    """Attention's Q, K, V must agree on batch, head size (Q, K) and sequence length (K, V)."""
    nodes = [n for n in inferred.graph.node if n.op_type == "Attention" and n.domain in ("", "ai.onnx")]
    if not nodes:
        return
    shapes = _known_shapes(inferred.graph)
    for node in nodes:
        names = (list(node.input) + ["", "", ""])[:3]
        q, k, v = (shapes.get(name) if name else None for name in names)
        if q is None or k is None or v is None or len({len(q), len(k), len(v)}) != 1:
            continue
        attrs = {a.name: a.i for a in node.attribute if a.type == onnx.AttributeProto.INT}
        pairs = [("batch", q[0], k[0]), ("batch", k[0], v[0])]
        if len(q) == 4:
            pairs += [("head size of Q and K", q[3], k[3]),
                      ("sequence length of K and V", k[2], v[2]),
                      ("kv heads of K and V", k[1], v[1])]
            if q[1] and k[1] and q[1] % k[1]:
                raise ModelError(f"{_describe(node)}: Q has {q[1]} heads, not a multiple of "
                                 f"K's {k[1]}")
        elif len(q) == 3:
            pairs.append(("sequence length of K and V", k[1], v[1]))
            qh, kh = attrs.get("q_num_heads"), attrs.get("kv_num_heads")
            if qh and kh and q[2] and k[2]:
                if q[2] % qh or k[2] % kh or q[2] // qh != k[2] // kh:
                    raise ModelError(f"{_describe(node)}: Q's hidden size {q[2]} over {qh} heads "
                                     f"and K's {k[2]} over {kh} heads give different head sizes")
        for what, a, b in pairs:
            if a and b and a != b:
                raise ModelError(f"{_describe(node)}: the {what} differ ({a} and {b})")
