"""Hand-written CNN/MatMul kernels vs onnx.reference and the ONNX backend node test data."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper as oh
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from onnxjit.kernels import shapes
from onnxjit.kernels.conv import conv, conv_transpose
from onnxjit.kernels.matmul import gemm, matmul_nd
from onnxjit.kernels.pool import (avgpool, global_avgpool, global_maxpool, lrn, maxpool,
                                  maxpool_with_indices)
from tests.helpers import as5, conv5, from5, no_residual, pool5

RTOL = {np.float32: 1e-4, np.float64: 1e-10}
ATOL = {np.float32: 1e-5, np.float64: 1e-12}


# --------------------------------------------------------------------------- wiring
def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: oh.get_attribute_value(a) for a in node.attribute}


def _t(v):
    return None if v is None else tuple(int(i) for i in v)


def run_kernel(op: str, inputs: list[np.ndarray], at: dict, n_outputs: int = 1):
    """Map one ONNX node onto the kernels exactly as the compiler is expected to (the pools and
    Convs in the canonical 5-D form, tests/helpers.py)."""
    x = inputs[0]
    ap = at.get("auto_pad", "NOTSET")
    if op == "Conv":
        w = inputs[1]
        b = inputs[2] if len(inputs) > 2 else np.zeros(w.shape[0], x.dtype)
        s, p, d, _ = shapes.conv_geometry(ap, x.shape[2:], w.shape[2:], _t(at.get("strides")),
                                          _t(at.get("dilations")), _t(at.get("pads")))
        return [conv5(conv, x, w, b, s, p, d, at.get("group", 1), 0, no_residual(x.dtype))]
    if op == "ConvTranspose":
        w, g = inputs[1], at.get("group", 1)
        b = inputs[2] if len(inputs) > 2 else np.zeros(w.shape[1] * g, x.dtype)
        s, p, d, o = shapes.conv_transpose_geometry(
            ap, x.shape[2:], w.shape[2:], _t(at.get("strides")), _t(at.get("dilations")),
            _t(at.get("pads")), _t(at.get("output_padding")), _t(at.get("output_shape")))
        return [conv5(conv_transpose, x, w, b, s, p, d, g, shapes.spatial3(o))]
    if op in ("MaxPool", "AveragePool"):
        k = _t(at["kernel_shape"])
        s, p, d, o = shapes.pool_geometry(ap, x.shape[2:], k, _t(at.get("strides")),
                                          _t(at.get("dilations")), _t(at.get("pads")),
                                          at.get("ceil_mode", 0))
        if op == "AveragePool":
            return [avgpool(x, k, s, p, d, o, at.get("count_include_pad", 0))]
        if n_outputs == 2:
            return list(pool5(maxpool_with_indices, x, k, s, p, d, o,
                              at.get("storage_order", 0)))
        return [maxpool(x, k, s, p, d, o)]
    if op == "GlobalAveragePool":
        return [from5(global_avgpool(as5(x)), x.ndim)]
    if op == "GlobalMaxPool":
        return [from5(global_maxpool(as5(x)), x.ndim)]
    if op == "LRN":
        return [from5(lrn(as5(x), at["size"], float(at.get("alpha", 1e-4)),
                          float(at.get("beta", 0.75)), float(at.get("bias", 1.0))), x.ndim)]
    if op == "MatMul":
        return [matmul_nd(x, inputs[1])]
    if op == "Gemm":
        a, b = inputs[0], inputs[1]
        c = inputs[2] if len(inputs) > 2 else np.zeros((1, 1), a.dtype)
        c2 = c.reshape((1, 1) if c.ndim == 0 else (1, -1) if c.ndim == 1 else c.shape)
        # float attributes are float32 in the proto: round like the serialized model does
        alpha, beta = (float(np.float32(at.get(k, 1.0))) for k in ("alpha", "beta"))
        return [gemm(a, b, np.ascontiguousarray(c2), alpha, beta,
                     at.get("transA", 0), at.get("transB", 0))]
    raise NotImplementedError(op)


def run_ref(op: str, inputs: list[np.ndarray], at: dict, n_outputs: int = 1, opset: int = 21):
    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_outputs)]
    node = oh.make_node(op, names, outs, **at)
    tp = oh.np_dtype_to_tensor_dtype(inputs[0].dtype)
    graph = oh.make_graph(
        [node], "g",
        [oh.make_tensor_value_info(n, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs)],
        [oh.make_tensor_value_info(o, tp, None) for o in outs])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))


def _rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def check(op, inputs, at, n_outputs=1, ref=None):
    dt = inputs[0].dtype.type
    ref = ref if ref is not None else run_ref(op, inputs, at, n_outputs)
    got = run_kernel(op, inputs, at, n_outputs)
    for g, r in zip(got, ref):
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=RTOL.get(dt, 0), atol=ATOL.get(dt, 0))


DTYPES = [np.float32, np.float64]

# --------------------------------------------------------------------------- Conv
CONV_CASES = [
    # x shape, w shape, attrs
    ((1, 3, 7, 8), (4, 3, 3, 3), {}),
    ((2, 3, 7, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 9), (6, 4, 3, 3), {"strides": [2, 2], "pads": [1, 0, 2, 1]}),
    ((1, 4, 10, 9), (6, 2, 3, 3), {"group": 2, "dilations": [2, 1], "pads": [2, 1, 2, 1]}),
    ((2, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 8, 6, 6), (5, 8, 1, 1), {}),  # 1x1 direct path
    ((2, 8, 6, 6), (4, 4, 1, 1), {"group": 2}),
    ((1, 8, 7, 7), (5, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 11, 13), (4, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 3, 9, 10), (2, 3, 3, 2), {"auto_pad": "SAME_UPPER", "strides": [2, 3]}),
    ((1, 3, 9, 10), (2, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 3, 9, 10), (2, 3, 3, 3), {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}),
    ((1, 3, 9, 10), (2, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 1]}),
    ((1, 3, 5, 5), (2, 3, 5, 5), {"pads": [4, 4, 4, 4], "strides": [3, 3]}),  # mostly padding
    ((2, 3, 17), (4, 3, 3), {"pads": [1, 2], "strides": [2]}),  # 1-D
    ((1, 4, 20), (4, 2, 5), {"group": 2, "dilations": [3], "auto_pad": "SAME_UPPER"}),
    ((1, 2, 5, 6, 7), (3, 2, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),  # 3-D
    ((2, 4, 6, 5, 7), (4, 2, 2, 3, 2), {"group": 2, "strides": [2, 1, 2],
                                        "dilations": [1, 2, 1], "pads": [0, 1, 1, 1, 0, 0]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,at", CONV_CASES)
@pytest.mark.parametrize("bias", [False, True])
def test_conv(xs, ws, at, dtype, bias):
    ins = [_rand(xs, dtype, 1), _rand(ws, dtype, 2)]
    if bias:
        ins.append(_rand((ws[0],), dtype, 3))
    check("Conv", ins, at)


def test_conv_large_tiled():
    """Several im2col row tiles, including a partial last tile."""
    ins = [_rand((1, 16, 61, 67), np.float32, 1), _rand((8, 16, 3, 3), np.float32, 2),
           _rand((8,), np.float32, 3)]
    check("Conv", ins, {"pads": [1, 1, 1, 1]})


# --------------------------------------------------------------------------- ConvTranspose
CONVT_CASES = [
    ((1, 2, 3, 3), (2, 3, 3, 3), {}),
    ((2, 2, 4, 3), (2, 3, 3, 3), {"strides": [2, 2]}),
    ((1, 2, 4, 4), (2, 3, 3, 3), {"strides": [3, 2], "pads": [1, 2, 1, 2]}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ((1, 2, 3, 3), (2, 2, 3, 3), {"strides": [2, 2], "output_shape": [7, 7]}),
    ((1, 2, 4, 5), (2, 3, 2, 3), {"dilations": [2, 2], "pads": [1, 0, 0, 1]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 2, 4, 5), (2, 3, 1, 1), {"strides": [2, 2]}),
    ((1, 2, 7), (2, 3, 3), {"strides": [2], "pads": [1, 0]}),  # 1-D
    ((1, 2, 3, 4, 3), (2, 2, 3, 2, 3), {"strides": [2, 1, 2]}),  # 3-D
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,ws,at", CONVT_CASES)
@pytest.mark.parametrize("group", [1, 2])
def test_conv_transpose(xs, ws, at, dtype, group):
    xs = (xs[0], xs[1] * group) + xs[2:]
    ws = (ws[0] * group,) + ws[1:]
    ins = [_rand(xs, dtype, 1), _rand(ws, dtype, 2), _rand((ws[1] * group,), dtype, 3)]
    at = dict(at, group=group) if group > 1 else at
    ref = None
    if group > 1:
        # onnx.reference mis-assembles groups when M/group > 1: stitch group=1 runs instead
        cg, mg = xs[1] // group, ws[1]
        parts = [run_ref("ConvTranspose",
                         [np.ascontiguousarray(ins[0][:, g * cg:(g + 1) * cg]),
                          np.ascontiguousarray(ins[1][g * cg:(g + 1) * cg]),
                          np.ascontiguousarray(ins[2][g * mg:(g + 1) * mg])],
                         {k: v for k, v in at.items() if k != "group"})[0]
                 for g in range(group)]
        ref = [np.concatenate(parts, axis=1)]
    check("ConvTranspose", ins, at, ref=ref)


# --------------------------------------------------------------------------- pools
POOL_CASES = [
    ((1, 2, 7, 8), {"kernel_shape": [2, 2]}),
    ((2, 3, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 9, 9), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 0, 1]}),
    ((1, 2, 8, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                    "ceil_mode": 1}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ((1, 2, 9, 8), {"kernel_shape": [2, 3], "dilations": [2, 1], "strides": [2, 1],
                    "ceil_mode": 1}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 7, 8), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "auto_pad": "VALID", "strides": [2, 2]}),
    ((2, 3, 11), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),  # 1-D
    ((1, 2, 5, 6, 7), {"kernel_shape": [2, 3, 2], "strides": [2, 1, 2], "pads": [0, 1, 1, 1, 1, 0]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,at", POOL_CASES)
def test_maxpool(xs, at, dtype):
    check("MaxPool", [_rand(xs, dtype)], at)


@pytest.mark.parametrize("xs,at", POOL_CASES[:7] + POOL_CASES[10:])
@pytest.mark.parametrize("storage_order", [0, 1])
def test_maxpool_indices(xs, at, storage_order):
    x = _rand(xs, np.float32)
    at = dict(at, storage_order=storage_order)
    y, idx = run_kernel("MaxPool", [x], at, 2)
    np.testing.assert_array_equal(y, run_ref("MaxPool", [x], at)[0])
    # the index must point at the maximum (row-major or spatially column-major)
    if storage_order == 0:
        np.testing.assert_array_equal(x.reshape(-1)[idx], y)
    else:
        n, c = x.shape[:2]
        xt = x.reshape(n * c, *x.shape[2:]).transpose(0, *range(x.ndim - 2, 0, -1))
        np.testing.assert_array_equal(xt.reshape(-1)[idx], y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,at", POOL_CASES)
@pytest.mark.parametrize("cip", [0, 1])
def test_avgpool(xs, at, dtype, cip):
    check("AveragePool", [_rand(xs, dtype)], dict(at, count_include_pad=cip))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs", [(2, 3, 5), (2, 3, 4, 5), (1, 4, 3, 2, 5), (1, 2, 1, 1)])
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool(xs, op, dtype):
    x = _rand(xs, dtype)
    # numpy oracle: onnx.reference's GlobalMaxPool reduces the wrong axes for non-2-D inputs
    red = np.mean if op == "GlobalAveragePool" else np.max
    ref = red(x, axis=tuple(range(2, x.ndim)), keepdims=True).astype(dtype)
    check(op, [x], {}, ref=[ref])
    if x.ndim == 4:
        check(op, [x], {})


def _lrn_numpy(x, size, alpha, beta, bias):
    """Spec formula (onnx.reference's LRN loops over the batch axis instead of channels)."""
    sq = np.zeros_like(x)
    c = x.shape[1]
    for i in range(c):
        lo, hi = max(0, i - (size - 1) // 2), min(c, i + int(np.ceil((size - 1) / 2)) + 1)
        sq[:, i] = (x[:, lo:hi] ** 2).sum(axis=1)
    return (x / (bias + alpha / size * sq) ** beta).astype(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs", [(2, 5, 4, 3), (1, 7, 3, 3), (3, 2, 5, 4), (1, 6, 4)])
@pytest.mark.parametrize("size,alpha,beta,bias", [(3, 1e-4, 0.75, 1.0), (4, 0.5, 0.5, 2.0),
                                                  (5, 2e-2, 0.9, 1.5)])
def test_lrn(xs, dtype, size, alpha, beta, bias):
    x = _rand(xs, dtype)
    at = {"size": size, "alpha": alpha, "beta": beta, "bias": bias}
    check("LRN", [x], at, ref=[_lrn_numpy(x, size, alpha, beta, bias)])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("beta", [0.75, 1.0, 0.6])
def test_lrn_large_on_threads(threads, beta):
    """Past LRN_PAR_MIN the planes are shared between Numba's threads."""
    import numba
    x = _rand((2, 24, 40, 40), np.float32)
    at = {"size": 5, "alpha": 1e-2, "beta": beta, "bias": 1.0}
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        check("LRN", [x], at, ref=[_lrn_numpy(x, 5, 1e-2, beta, 1.0)])
    finally:
        numba.set_num_threads(old)


# --------------------------------------------------------------------------- MatMul / Gemm
MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((4,), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)),
    ((3, 4), (2, 2, 4, 5)), ((1, 2, 3, 4), (3, 1, 4, 2)), ((2, 3, 4), (4,)),
]


@pytest.mark.parametrize("dtype", DTYPES + [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 7, s).astype(dtype) if np.issubdtype(dtype, np.integer)
            else rng.standard_normal(s).astype(dtype) for s in (sa, sb))
    check("MatMul", [a, b], {})


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("cshape", [None, (), (1,), (5,), (3, 5), (3, 1), (1, 5)])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.25, 0.35)])
def test_gemm(dtype, ta, tb, cshape, alpha, beta):
    a = _rand((4, 3) if ta else (3, 4), dtype, 1)
    b = _rand((5, 4) if tb else (4, 5), dtype, 2)
    ins = [a, b] + ([] if cshape is None else [_rand(cshape, dtype, 3)])
    check("Gemm", ins, {"transA": ta, "transB": tb, "alpha": alpha, "beta": beta})


# --------------------------------------------------------------------------- backend data
PREFIXES = ("test_conv", "test_basic_conv", "test_maxpool", "test_averagepool",
            "test_globalaveragepool", "test_globalmaxpool", "test_lrn", "test_matmul",
            "test_gemm", "test_convtranspose")
SKIP = {"test_convinteger", "test_matmulinteger", "test_maxpool_2d_uint8"}
SUPPORTED_OPS = {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
                 "GlobalMaxPool", "LRN", "MatMul", "Gemm"}


def _backend_cases():
    import warnings

    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():  # the loader imports every case module; silence their noise
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return sorted((c for c in cases
                   if c.name.startswith(PREFIXES) and not c.name.startswith(tuple(SKIP))),
                  key=lambda c: c.name)


def _load_data(case):
    import glob
    import os

    sets = []
    for d in sorted(glob.glob(os.path.join(case.model_dir, "test_data_set_*"))):
        def read(kind):
            out = []
            for f in sorted(glob.glob(os.path.join(d, f"{kind}_*.pb")),
                            key=lambda p: int(p.rsplit("_", 1)[1][:-3])):
                t = onnx.TensorProto()
                with open(f, "rb") as fh:
                    t.ParseFromString(fh.read())
                out.append(numpy_helper.to_array(t))
            return out
        sets.append((read("input"), read("output")))
    return sets


BACKEND = _backend_cases()


@pytest.mark.parametrize("case", BACKEND, ids=[c.name for c in BACKEND])
def test_backend_node_data(case):
    model = onnx.load(case.model) if isinstance(case.model, str) else case.model
    if model is None:
        model = onnx.load(f"{case.model_dir}/model.onnx")
    (node,) = model.graph.node
    assert node.op_type in SUPPORTED_OPS
    data = case.data_sets or _load_data(case)
    assert data
    for inputs, outputs in data:
        inputs = [np.asarray(v) for v in inputs]
        assert inputs[0].dtype in (np.float32, np.float64)
        got = run_kernel(node.op_type, inputs, _attrs(node), len(node.output))
        for g, r in zip(got, outputs):
            assert g.shape == r.shape and g.dtype == r.dtype
            np.testing.assert_allclose(g, r, rtol=1e-3, atol=1e-5)
