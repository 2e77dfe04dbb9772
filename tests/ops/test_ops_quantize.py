"""Quantization and signal-processing ops against onnx's ReferenceEvaluator."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.helper import np_dtype_to_tensor_dtype
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from helpers import check_reference, one_node

F32, F64, U8, I8, U16, I16, I32 = (np.float32, np.float64, np.uint8, np.int8, np.uint16,
                                   np.int16, np.int32)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _ints(shape, dtype, seed=0):
    info = np.iinfo(dtype)
    return _rng(seed).integers(info.min, int(info.max) + 1, shape).astype(dtype)


# ---- QuantizeLinear / DequantizeLinear -----------------------------------------------------
# (x shape, scale shape, axis, block_size): per tensor (0-d and [1]), per axis, blocked
LAYOUTS = [((2, 3, 4), (), 1, 0), ((5,), (1,), 0, 0), ((2, 3, 4), (3,), 1, 0),
           ((2, 3, 4), (4,), -1, 0), ((3, 5), (3, 3), 1, 2), ((4, 2, 3), (2, 2, 3), 0, 2)]


def _scale_zp(scale_shape, dtype, seed):
    scale = (_rng(seed).uniform(0.05, 0.5, scale_shape)).astype(F32)
    zp = _ints(scale_shape, dtype, seed + 1) // 2
    return scale, zp.astype(dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [U8, I8, U16, I16])
def test_quantize_linear(layout, dtype):
    shape, sshape, axis, block = layout
    x = (_rng(1).standard_normal(shape) * 40).astype(F32)
    scale, zp = _scale_zp(sshape, dtype, 2)
    attrs = {"axis": axis} | ({"block_size": block} if block else {})
    check_reference(one_node("QuantizeLinear", {"x": x, "s": scale, "z": zp}, **attrs),
           {"x": x, "s": scale, "z": zp})


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [U8, I16, I32])
def test_dequantize_linear(layout, dtype):
    shape, sshape, axis, block = layout
    x = _ints(shape, dtype, 3)
    scale, zp = _scale_zp(sshape, dtype, 4)
    attrs = {"axis": axis} | ({"block_size": block} if block else {})
    check_reference(one_node("DequantizeLinear", {"x": x, "s": scale, "z": zp}, **attrs),
           {"x": x, "s": scale, "z": zp})


@pytest.mark.parametrize("opset", [19, 21, 23])  # the reference has no opset-10 Dequantize
def test_quantize_dequantize_opsets_without_zero_point(opset):
    x = (_rng(5).standard_normal((3, 4)) * 100).astype(F32)
    x.flat[:6] = [0.25, 0.75, -1.25, 1.25, 1000, -1000]  # ties round to even; saturation
    scale = np.array(0.5, F32)
    check_reference(one_node("QuantizeLinear", {"x": x}, opset=opset, consts={"s": scale}), {"x": x})
    q = _ints((3, 4), U8, 6)
    check_reference(one_node("DequantizeLinear", {"q": q}, opset=opset, consts={"s": scale}), {"q": q})


def test_quantize_float64_breaks_the_type_constraints():
    """float64 is no QuantizeLinear input nor DequantizeLinear scale type (T1/T2: float, float16,
    bfloat16, int32); onnx's strict inference refuses the models, and onnxjit names the node."""
    import onnx
    from onnxjit.errors import ModelError
    x = (_rng(7).standard_normal((4, 5)) * 30).astype(F64)
    scale = np.array([0.3, 0.9, 0.1, 2.0], F64)
    q = _ints((4, 5), I8, 8)
    for model in (one_node("QuantizeLinear", {"x": x, "s": scale}, axis=0,
                         output_dtype=TensorProto.INT8),
                  one_node("DequantizeLinear", {"q": q, "s": scale}, axis=0)):
        with pytest.raises(onnx.shape_inference.InferenceError):
            onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        with pytest.raises(ModelError, match="(Quantize|Dequantize)Linear node.*double"):
            onnxjit.backend.prepare(model)


def test_quantize_output_dtype_and_per_axis_scale():
    x = (_rng(7).standard_normal((4, 5)) * 30).astype(F32)
    scale = np.array([0.3, 0.9, 0.1, 2.0], F32)
    check_reference(one_node("QuantizeLinear", {"x": x, "s": scale}, axis=0, output_dtype=TensorProto.INT8),
           {"x": x, "s": scale})
    q = _ints((4, 5), I8, 8)
    check_reference(one_node("DequantizeLinear", {"q": q, "s": scale}, axis=0), {"q": q, "s": scale})


def test_quantize_bad_axis_is_refused():
    x, s = np.zeros((2, 3), F32), np.ones(4, F32)
    with pytest.raises(Exception, match="does not match"):
        model = one_node("QuantizeLinear", {"x": x, "s": s}, axis=1)
        onnxjit.backend.prepare(model).run({"x": x, "s": s})


@pytest.mark.parametrize("data", [
    [0, 2, -3, -2.5, 1.34, 0.5], [-1.0, -2.1, -1.3, -2.5, -3.34, -4.0],
    [1, 2.1, 1.3, 2.5, 3.34, 4.0], np.linspace(-7.3, 3.1, 24).reshape(2, 3, 4), [0.0, 0.0]])
def test_dynamic_quantize_linear(data):
    x = np.asarray(data, F32)
    check_reference(one_node("DynamicQuantizeLinear", {"x": x}, n_out=3, opset=11), {"x": x})


# ---- MatMulInteger / QLinearMatMul -----------------------------------------------------------
# (a shape, b shape, a zero-point shape, b zero-point shape)
MATMULS = [((4, 3), (3, 2), (), ()), ((4, 3), (3, 5), (4, 1), (5,)),
           ((2, 4, 3), (3, 2), (1,), (1,)), ((3,), (2, 3, 4), None, (4,)),
           ((2, 1, 3, 5), (4, 5, 2), (2, 1, 3, 1), None)]


@pytest.mark.parametrize("shapes", MATMULS)
@pytest.mark.parametrize("types", [(U8, U8), (I8, U8)])
def test_matmul_integer(shapes, types):
    ashape, bshape, azs, bzs = shapes
    a, b = _ints(ashape, types[0], 1), _ints(bshape, types[1], 2)
    feeds = {"a": a, "b": b}
    feeds["az" if azs is not None else "_skip_a"] = _ints(azs or (), types[0], 3)
    if bzs is not None:
        feeds["bz"] = _ints(bzs, types[1], 4)
    check_reference(one_node("MatMulInteger", feeds, opset=10),
           {k: v for k, v in feeds.items() if not k.startswith("_skip")})


# (a shape, b shape, b dtype, a zero point given, b zero point)
CONST_MATMULS = [((7, 10), (10, 33), I8, True, None), ((1, 13, 64), (64, 40), I8, True, 0),
                 ((6, 9), (9, 32), U8, False, 131), ((2, 5, 5), (5, 3), U8, True, 7),
                 ((12, 1030), (1030, 17), I8, True, -3)]


def _bell(shape, dtype, seed):
    """Weights as quantize_dynamic leaves them (bell-shaped, a few at the ends of the range):
    the AVX2 kernel takes them, with some weight pairs over vpmaddubsw's int16 limit."""
    info = np.iinfo(dtype)
    mid = (int(info.min) + int(info.max) + 1) // 2
    x = _rng(seed).standard_normal(shape) * 40 + mid
    return np.clip(np.round(x), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("weights", ["uniform", "bell"])
@pytest.mark.parametrize("ashape,bshape,btype,with_az,bz", CONST_MATMULS)
def test_matmul_integer_constant_weights(ashape, bshape, btype, with_az, bz, weights):
    """uint8 activations by constant int8/uint8 weights (as quantize_dynamic writes them): the
    integer kernel of the target (kernels/qgemm.py: AVX512-VNNI, or AVX2 where the weights'
    pairs allow it); exact against the reference. Row counts off the 6- and 4-row kernels,
    K off multiples of 4, N off multiples of 32 and 16."""
    feeds = {"a": _ints(ashape, U8, 1)}
    if with_az:
        feeds["az"] = _ints((), U8, 3)
    consts = {"b": _ints(bshape, btype, 2) if weights == "uniform" else _bell(bshape, btype, 2)}
    if bz is not None:
        consts["bz"] = np.array(bz, btype)
    node = helper.make_node("MatMulInteger", ["a", "b", "az" if with_az else "",
                                              "bz" if bz is not None else ""], ["y0"])
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feeds.items()],
        [helper.make_tensor_value_info("y0", 0, None)],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    check_reference(model, feeds)
    from onnxjit.kernels.qgemm import pack_b_madd
    from onnxjit.target import host
    kind = host().int8_dot
    if kind == "madd" and pack_b_madd(consts["b"], bz or 0) is None:
        kind = None                 # too many pairs over the int16 limit: float64 BLAS
    source = onnxjit.backend.prepare(model).source()
    assert ("qgemm_u8s8(" in source, "qgemm_u8s8_madd(" in source) == (kind == "vnni",
                                                                        kind == "madd")
    if weights == "bell" and btype == I8 and bshape[0] > 9 and host().int8_dot is not None:
        assert kind is not None     # the AVX2 kernel's weights (pairs clipped and fixed up)


def _qdense(pattern, rows=7):
    """A dense layer as onnxruntime's quantize_dynamic writes it (DynamicQuantizeLinear,
    MatMulInteger by int8 weights, the two scales' Mul between them in node order, Cast, Mul,
    Add of a bias), or a variant of its tail (`pattern`)."""
    rng = _rng(11)
    k, n = 40, 24
    w = _bell((k, n), I8, 12)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0, I8), "wz"),
             numpy_helper.from_array(np.array(0.0123, F32), "ws"),
             numpy_helper.from_array(rng.standard_normal(n).astype(F32), "bias")]
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "qs", "qz"]),
             helper.make_node("MatMulInteger", ["q", "w", "qz", "wz"], ["acc"]),
             helper.make_node("Mul", ["qs", "ws"], ["s"]),
             helper.make_node("Cast", ["acc"], ["f"], to=TensorProto.FLOAT)]
    outs = ["y"]
    if pattern == "layer":
        nodes += [helper.make_node("Mul", ["f", "s"], ["fs"]),
                  helper.make_node("Add", ["fs", "bias"], ["y"])]
    elif pattern == "swapped":         # operands the other way round
        nodes += [helper.make_node("Mul", ["s", "f"], ["fs"]),
                  helper.make_node("Add", ["bias", "fs"], ["y"])]
    elif pattern == "cast_add":        # no scale
        nodes += [helper.make_node("Add", ["f", "bias"], ["y"])]
    elif pattern == "cast":
        nodes[-1].output[0] = "y"
    elif pattern == "shared":          # the int32 sums are an output too: nothing folds
        nodes += [helper.make_node("Mul", ["f", "s"], ["fs"]),
                  helper.make_node("Add", ["fs", "bias"], ["y"])]
        outs.append("acc")
    elif pattern == "scaled_twice":    # the second Mul stays a Mul
        nodes += [helper.make_node("Mul", ["f", "s"], ["fs"]),
                  helper.make_node("Mul", ["fs", "s"], ["y"])]
    graph = helper.make_graph(nodes, "qdense",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, k])],
                              [helper.make_tensor_value_info(o, 0, None) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return model, {"x": (rng.standard_normal((rows, k)) * 2).astype(F32)}


@pytest.mark.parametrize("pattern", ["layer", "swapped", "cast_add", "cast", "shared",
                                     "scaled_twice"])
def test_quantized_dense_layer_folds_into_the_gemm(pattern):
    """MatMulInteger -> Cast -> Mul (scale) -> Add (bias) is one integer GEMM writing float32
    (the step moves past the scales' Mul recorded before its Cast); the results are the
    reference's, rounded as its separate Cast, Mul and Add round them."""
    from onnxjit.target import host
    model, feeds = _qdense(pattern)
    fused = host().int8_dot is not None and pattern != "shared"
    # bit for bit where folded (the fused elementwise Mul + Add is one FMA, within 1 ulp)
    check_reference(model, feeds, **(dict(rtol=0, atol=0) if fused else {}))
    source = onnxjit.backend.prepare(model).source()
    assert ("qgemm_u8s8_f32(" in source or "qgemm_u8s8_madd_f32(" in source) == fused
    assert source.count("__k_qgemm.") == (host().int8_dot is not None)


def test_dynamic_quantize_linear_long_input():
    """Inputs of 64 or more elements take the 16-lane min/max loop (remainder included)."""
    x = (np.random.default_rng(5).standard_normal(1000) * 3 + 0.5).astype(F32)
    for v in (x, x[:67], np.abs(x), -np.abs(x[:80])):
        check_reference(one_node("DynamicQuantizeLinear", {"x": v}, n_out=3, opset=11), {"x": v})


@pytest.mark.parametrize("shapes", [((2, 4), (4, 3)), ((2, 2, 4), (2, 4, 3)), ((5, 6), (6, 7))])
@pytest.mark.parametrize("dtype", [U8, I8])
def test_qlinear_matmul(shapes, dtype):
    a, b = _ints(shapes[0], dtype, 1), _ints(shapes[1], dtype, 2)
    mid = 128 if dtype == U8 else 0
    feeds = {"a": a, "as": np.array([0.0066], F32), "az": np.array([mid - 14], dtype),
             "b": b, "bs": np.array(0.00705, F32), "bz": np.array(mid - 13, dtype),
             "ys": np.array([0.0107], F32), "yz": np.array([mid - 9], dtype)}
    check_reference(one_node("QLinearMatMul", feeds, opset=21), feeds)


# ---- ConvInteger / QLinearConv ---------------------------------------------------------------
# (x shape, w shape, attributes)
CONVS = [((1, 1, 5, 5), (2, 1, 3, 3), {}),
         ((2, 3, 6, 5), (4, 3, 2, 2), {"pads": [1, 0, 1, 2], "strides": [2, 1]}),
         ((1, 4, 6, 6), (4, 2, 3, 3), {"group": 2, "auto_pad": "SAME_UPPER"}),
         ((1, 2, 9), (3, 2, 3), {"dilations": [2], "pads": [1, 1]})]


@pytest.mark.parametrize("conv", CONVS)
@pytest.mark.parametrize("dtype,per_channel", [(U8, False), (I8, True)])
def test_conv_integer(conv, dtype, per_channel):
    xs, ws, attrs = conv
    per_channel = per_channel and len(ws) == 4  # the reference is per-channel for 2-D only
    x, w = _ints(xs, dtype, 1), _ints(ws, dtype, 2)
    wz = _ints((ws[0],) if per_channel else (), dtype, 4)
    feeds = {"x": x, "w": w, "xz": _ints((), dtype, 3), "wz": wz}
    check_reference(one_node("ConvInteger", feeds, opset=10, **attrs), feeds)


@pytest.mark.parametrize("conv", CONVS)
@pytest.mark.parametrize("dtype,per_channel", [(U8, True), (I8, False)])
def test_qlinear_conv(conv, dtype, per_channel):
    xs, ws, attrs = conv
    per_channel = per_channel and len(ws) == 4  # the reference is per-channel for 2-D only
    m = ws[0]
    feeds = {"x": _ints(xs, dtype, 1), "xs": np.array(0.02, F32), "xz": _ints((), dtype, 3) // 4,
             "w": _ints(ws, dtype, 2),
             "ws": _rng(5).uniform(0.001, 0.01, (m,) if per_channel else ()).astype(F32),
             "wz": _ints((m,) if per_channel else (), dtype, 4) // 8,
             "ys": np.array(0.3, F32), "yz": _ints((), dtype, 6) // 2,
             "B": _rng(7).integers(-3000, 3000, m).astype(np.int32)}
    check_reference(one_node("QLinearConv", feeds, opset=10, **attrs), feeds)


def test_qlinear_conv_without_bias():
    feeds = {"x": _ints((1, 1, 7, 7), U8, 1), "xs": np.array(0.0037, F32),
             "xz": np.array(132, U8), "w": np.zeros((1, 1, 1, 1), U8),
             "ws": np.array([0.0017], F32), "wz": np.array([255], U8),
             "ys": np.array(0.0016, F32), "yz": np.array(123, U8)}
    check_reference(one_node("QLinearConv", feeds, opset=10), feeds)


# ---- DFT / STFT / windows / MelWeightMatrix --------------------------------------------------
def _signal(shape, dtype, seed=0):
    return _rng(seed).standard_normal(shape).astype(dtype)


def _spectral_check(model, feeds):
    """DFT outputs: the reference's float32 FFT carries its own rounding, so the absolute
    tolerance follows the magnitude of the result."""
    e = np.asarray(ReferenceEvaluator(model).run(None, feeds)[0])
    check_reference(model, feeds, atol=(1e-5 if e.dtype == F32 else 1e-12) * max(1.0, np.abs(e).max()))


# (input shape, axis, inverse, onesided, dft_length)
DFTS = [((2, 8, 1), 1, 0, 0, None), ((2, 8, 2), 1, 0, 0, None), ((1, 10, 6, 1), 2, 0, 1, None),
        ((3, 7, 2), 1, 1, 0, None), ((2, 5, 2), 1, 1, 1, 8), ((2, 6, 2), 1, 1, 1, None),
        ((2, 6, 1), 1, 0, 0, 9), ((2, 9, 1), 1, 0, 1, 4), ((4, 3, 5, 2), -2, 1, 0, 7)]


@pytest.mark.parametrize("case", DFTS)
@pytest.mark.parametrize("opset,dtype", [(17, F32), (20, F64)])
def test_dft(case, opset, dtype):
    shape, axis, inverse, onesided, n = case
    x = _signal(shape, dtype)
    feeds = {"x": x}
    if n is not None:
        feeds["n"] = np.array(n, np.int64)
    elif opset >= 20:
        feeds["_skip_n"] = x
    attrs = {"inverse": inverse, "onesided": onesided}
    if opset >= 20:
        feeds["axis"] = np.array(axis, np.int64)
    else:
        attrs["axis"] = axis
    model = one_node("DFT", feeds, opset=opset, **attrs)
    _spectral_check(model, {k: v for k, v in feeds.items() if not k.startswith("_skip")})


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("window,onesided,channels", [(None, 1, 1), ("hann", 1, 1),
                                                      ("hann", 0, 2), (None, 0, 1)])
def test_stft(dtype, window, onesided, channels):
    x = _signal((2, 64, channels), dtype, 3)
    feeds = {"x": x, "step": np.array(6, np.int64)}
    if window:
        feeds["w"] = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(dtype)
    else:
        feeds["_skip_w"] = x
        feeds["len"] = np.array(16, np.int64)
    model = one_node("STFT", feeds, opset=17, onesided=onesided)
    _spectral_check(model, {k: v for k, v in feeds.items() if not k.startswith("_skip")})


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic,dtype", [(1, TensorProto.FLOAT), (0, TensorProto.DOUBLE)])
def test_windows_with_size_as_graph_input(op, periodic, dtype):
    size = np.array(10, np.int32)
    model = one_node(op, {"n": size}, opset=17, periodic=periodic, output_datatype=dtype)
    check_reference(model, {"n": size})
    # a new size recompiles: the size is part of the signature
    check_reference(model, {"n": np.array(7, np.int32)})


def test_mel_weight_matrix_with_graph_inputs():
    feeds = {"bins": np.array(8, np.int32), "n": np.array(16, np.int32),
             "rate": np.array(8192, np.int32), "lo": np.array(0, F32),
             "hi": np.array(4096, F32)}
    check_reference(one_node("MelWeightMatrix", feeds, opset=17), feeds)


def test_window_feeding_stft_compiles():
    """A window computed from a constant size folds and feeds a compiled STFT."""
    x = _signal((1, 40, 1), F32, 9)
    const = lambda name, v: helper.make_node(  # noqa: E731
        "Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.int64)))
    nodes = [const("n", 8), helper.make_node("HannWindow", ["n"], ["w"]), const("s", 4),
             helper.make_node("STFT", ["x", "s", "w"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", 0, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    _spectral_check(model, {"x": x})
