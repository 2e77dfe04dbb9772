"""The CUDA front end: onnxjit's specialize walk with CUDA lowerings for library-kernel ops.

Constant folding (`specialize.fold_node`), the LoweringContext, Values and Steps are shared with
the CPU target, and so are the elementwise lowerings (ops/elementwise.py: scalar expressions that
fuse into generated CUDA kernels) and the shape queries. Ops whose CPU lowering calls a CPU
library kernel have CUDA lowerings (cuda/ops.py, cuda/ops_nn.py) returning structured steps.
CPU peephole rewrites (which fold into CPU-packed weights) are not applied.
"""
from __future__ import annotations

import numpy as np

from .. import registry, validate
from ..errors import LoweringError, ModelError, UnsupportedOpError
from ..ir import BIT_TYPES, NARROW_FLOATS, const_value, initializers
from ..target import CUDA
from ..specialize import (NONDETERMINISTIC, LoweringContext, Program, _check_attributes,
                          _resolve, _use_counts, fold_node)
from . import ops, ops_nn, ops_reduce  # noqa: F401  (registers the CUDA lowerings)

# Ops whose shared lowering yields only elementwise steps (or a folded constant) on the
# dtypes the CUDA target holds; any call step they make is refused (see _check_steps).
SHARED = {
    # unary math and activations
    "Neg", "Abs", "Relu", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Round", "Tanh",
    "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "Sigmoid", "Softplus", "Softsign", "Mish", "BitwiseNot", "Sign", "Not", "IsNaN", "IsInf",
    "LeakyRelu", "HardSigmoid", "HardSwish", "Elu", "Selu", "Celu", "ThresholdedRelu", "Gelu",
    "Erf", "Swish", "Shrink", "PRelu",
    # binary, comparisons, logic, variadic
    "Add", "Sub", "Mul", "Div", "Mod", "Pow", "BitShift", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr",
    "BitwiseXor", "Max", "Min", "Sum", "Mean",
    # selection, casts, inference-time normalization
    "Where", "Clip", "Cast", "CastLike",
    # identity-like and shape queries (no kernel, or a folded constant)
    "Identity", "Shape", "Size", "Constant", "EyeLike",
}


def cuda_ops():
    """The op types the CUDA target lowers."""
    return SHARED | ops.lowered_ops()


def unsupported_cuda_ops(model):
    """Sorted (domain, op_type, opset) triples the CUDA target has no lowering for."""
    from ..pipeline import unsupported_ops
    return unsupported_ops(model, lambda op, opset, domain: domain in registry.ONNX_DOMAINS
                           and _has_rule(op, opset))


def _has_rule(op_type, opset):
    if op_type in SHARED:
        return registry.lookup(op_type, opset) is not None
    return ops.lookup(op_type, opset) is not None


def specialize_cuda(model, input_values):
    """A Program for the CUDA target (see specialize.specialize, which this mirrors)."""
    import onnxjit.ops  # noqa: F401  (the shared lowerings)
    graph = model.graph
    model_opsets = {(e.domain or ""): e.version for e in model.opset_import}
    for v in input_values:
        if (v.dtype == np.dtype("V2") or v.dtype in BIT_TYPES
                or (v.dtype in NARROW_FLOATS and v.dtype != np.float16)):
            raise LoweringError(f"input {v.name!r}: dtype {v.dtype} is not supported on CUDA")
    program = Program(list(input_values), [], [], [], _use_counts(graph), target=CUDA)
    env = {name: const_value(a, name) for name, a in initializers(graph).items()}
    env.update({v.name: v for v in input_values})
    for node in graph.node:
        opset = model_opsets.get(node.domain or "", model_opsets.get("ai.onnx"))
        inputs = [_resolve(env, name, node) for name in node.input]
        outs = lower_node(program, node, inputs, opset, model_opsets)
        validate.check_outputs(node, outs)     # the element limit, as specialize.walk
        for name, value in zip(node.output, outs):
            if name:
                env[name] = value
                program.names_of.setdefault(id(value), []).append(name)
    for out in graph.output:
        if out.name not in env:
            raise ModelError(f"graph output {out.name!r} is produced by no node")
        program.outputs.append(env[out.name])
        program.output_names.append(out.name)
    return program


def lower_node(program, node, inputs, opset, model_opsets):
    """The node's output Values: folded when its inputs are constant, else lowered for CUDA."""
    from ..ir import attributes
    attrs = attributes(node)
    validate.check_fold(node, inputs, model_opsets)   # before folding or lowering allocates
    if all(v is None or v.is_const for v in inputs) and node.op_type not in NONDETERMINISTIC:
        folded = fold_node(node, inputs, model_opsets)
        if folded is not None:
            return folded
    domain = node.domain or ""
    rule = None
    if domain in registry.ONNX_DOMAINS:
        rule = (registry.lookup(node.op_type, opset) if node.op_type in SHARED
                else ops.lookup(node.op_type, opset))
    if rule is None:
        raise UnsupportedOpError(f"the CUDA target cannot lower {domain or 'ai.onnx'}::"
                                 f"{node.op_type} at opset {opset}",
                                 [(domain or "ai.onnx", node.op_type, opset)])
    ctx = LoweringContext(program, node, opset, model_opsets)
    _check_attributes(ctx, rule, attrs)
    first = len(program.steps)
    result = rule(ctx, *inputs, **attrs)
    _check_steps(ctx, program.steps[first:])
    return list(result) if isinstance(result, (list, tuple)) else [result]


def _check_steps(ctx, steps):
    """Every step is elementwise or a CUDA step: a shared lowering that fell back to a CPU
    library call (an unusual dtype or attribute) is refused, naming the node."""
    for s in steps:
        if s.kind == "call" and "cuda" not in s.meta:
            ctx.fail("this form of the op is not supported on CUDA (it needs a CPU kernel)")
        for v in s.outs:
            if v.dtype in BIT_TYPES or (v.dtype in NARROW_FLOATS and v.dtype != np.float16):
                ctx.fail(f"dtype {v.dtype} is not supported on CUDA")
