"""float8, float4, int4 and int2: held as bit patterns (uint8) in compiled code, converted by
kernels/narrow.py. Oracles: ml_dtypes (every bit pattern, rounding boundaries), onnx's
numpy_helper (saturate_cast, to_float8e8m0: what the reference's Cast runs) and
onnx.reference.ReferenceEvaluator for whole models."""
import ml_dtypes
import numpy as np
import pytest
from numba import njit
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from onnxjit.errors import LoweringError
from onnxjit.kernels import narrow

FLOATS = {  # name: (dtype, ONNX type, index in _encode / _decode)
    "e4m3fn": (ml_dtypes.float8_e4m3fn, TensorProto.FLOAT8E4M3FN, 0),
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, TensorProto.FLOAT8E4M3FNUZ, 1),
    "e5m2": (ml_dtypes.float8_e5m2, TensorProto.FLOAT8E5M2, 2),
    "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, TensorProto.FLOAT8E5M2FNUZ, 3),
    "e2m1": (ml_dtypes.float4_e2m1fn, TensorProto.FLOAT4E2M1, 4),
    "e8m0": (ml_dtypes.float8_e8m0fnu, TensorProto.FLOAT8E8M0, 5),
}
INTS = {  # name: (dtype, ONNX type, index in _int_codes)
    "int4": (ml_dtypes.int4, TensorProto.INT4, 0), "uint4": (ml_dtypes.uint4, TensorProto.UINT4, 1),
    "int2": (ml_dtypes.int2, TensorProto.INT2, 2), "uint2": (ml_dtypes.uint2, TensorProto.UINT2, 3),
}
MASKS = (0xF, 0xF, 0x3, 0x3)


@njit
def _encode(x, fmt, sat, out):
    for i in range(x.size):
        v = x[i]
        if fmt == 0:
            out[i] = narrow.enc_e4m3fn(v, sat)
        elif fmt == 1:
            out[i] = narrow.enc_e4m3fnuz(v, sat)
        elif fmt == 2:
            out[i] = narrow.enc_e5m2(v, sat)
        elif fmt == 3:
            out[i] = narrow.enc_e5m2fnuz(v, sat)
        else:
            out[i] = narrow.enc_e2m1(v, sat)


@njit
def _decode(b, fmt, out):
    for i in range(b.size):
        v = b[i]
        if fmt == 0:
            out[i] = narrow.dec_e4m3fn(v)
        elif fmt == 1:
            out[i] = narrow.dec_e4m3fnuz(v)
        elif fmt == 2:
            out[i] = narrow.dec_e5m2(v)
        elif fmt == 3:
            out[i] = narrow.dec_e5m2fnuz(v)
        elif fmt == 4:
            out[i] = narrow.dec_e2m1(v)
        else:
            out[i] = narrow.dec_e8m0(v)


@njit
def _e8m0(x, sat, mode, out):
    for i in range(x.size):
        out[i] = narrow.enc_e8m0(x[i], sat, mode)


@njit
def _int_codes(b, fmt, out):
    for i in range(b.size):
        if fmt == 0:
            out[i] = narrow.dec_int4(b[i])
        elif fmt == 1:
            out[i] = narrow.dec_uint4(b[i])
        elif fmt == 2:
            out[i] = narrow.dec_int2(b[i])
        else:
            out[i] = narrow.dec_uint2(b[i])


@njit
def _from_float(x, mask, out):
    for i in range(x.size):
        out[i] = narrow.f2low(x[i], mask)


@njit
def _from_int(x, mask, out):
    for i in range(x.size):
        out[i] = narrow.low_bits(np.int64(x[i]), mask)


def _same_floats(got, want):
    """Equal bit for bit (so -0.0 != 0.0), any NaN equal to any NaN."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    ok = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert ok.all(), (got[~ok][:8], want[~ok][:8])


def _patterns(dtype):
    """Every bit pattern of `dtype`, as uint8."""
    bits = {ml_dtypes.float4_e2m1fn: 4, ml_dtypes.int4: 4, ml_dtypes.uint4: 4, ml_dtypes.int2: 2,
            ml_dtypes.uint2: 2}.get(dtype, 8)
    return np.arange(1 << bits, dtype=np.uint8)


def _boundaries(dtype):
    """Every finite value of the format, the midpoints between neighbours (the ties), float32
    neighbours of each midpoint, float64 values just off each midpoint (a float64 source rounds
    to float32 first, as ml_dtypes does), values past the largest, specials, random values."""
    values = _patterns(dtype).view(dtype).astype(np.float64)
    values = np.unique(values[np.isfinite(values)])
    mids = (values[1:] + values[:-1]) / 2
    m32 = mids.astype(np.float32)
    rng = np.random.default_rng(0)
    wide = rng.standard_normal(3000) * 2.0 ** rng.integers(-24, 24, 3000)
    return np.concatenate([
        values, mids, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(-np.inf)),
        values * 1.5, values * 1.01, values * 4.0, wide, mids * (1 + 2.0 ** -40),
        mids * (1 - 2.0 ** -40),
        [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-30, -1e-30, 1e-45]])


@pytest.mark.parametrize("name", sorted(FLOATS))
def test_decoders_match_ml_dtypes_on_every_bit_pattern(name):
    dtype, _, fmt = FLOATS[name]
    bits = _patterns(dtype)
    got = np.empty(bits.size, np.float32)
    _decode(bits, fmt, got)
    _same_floats(got, bits.view(dtype).astype(np.float32))


@pytest.mark.parametrize("source", [np.float32, np.float64])
@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("name", ["e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz", "e2m1"])
def test_encoders_round_like_the_reference(name, saturate, source):
    """Round to nearest even at every boundary; saturate as ONNX's Cast (the reference's
    saturate_cast), else ml_dtypes' overflow to NaN / inf (float4 always saturates)."""
    dtype, _, fmt = FLOATS[name]
    x = _boundaries(dtype).astype(source)
    got = np.empty(x.size, np.uint8)
    _encode(x, fmt, saturate, got)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (numpy_helper.saturate_cast(x, dtype) if saturate and name != "e2m1"
                else x.astype(dtype))
    bad = got != want.view(np.uint8)
    assert not bad.any(), (x[bad][:8], got[bad][:8], want.view(np.uint8)[bad][:8])


@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("mode", ["up", "nearest", "down"])
def test_e8m0_encoder_matches_the_reference(mode, saturate):
    """Every float32 exponent with the fraction patterns that decide each rounding mode."""
    exps = np.arange(256, dtype=np.uint32) << 23
    fracs = np.array([0, 1, 0x1FFFFF, 0x200000, 0x3FFFFF, 0x400000, 0x400001, 0x600000,
                      0x7FFFFF], np.uint32)
    bits = (exps[:, None] | fracs[None, :]).reshape(-1)
    x = np.concatenate([bits, bits | np.uint32(1 << 31)]).view(np.float32)
    got = np.empty(x.size, np.uint8)
    _e8m0(x, saturate, {"up": 0, "nearest": 1, "down": 2}[mode], got)
    want = numpy_helper.to_float8e8m0(x, saturate, mode).view(np.uint8)
    bad = got != want
    assert not bad.any(), (x[bad][:8], got[bad][:8], want[bad][:8])


@pytest.mark.parametrize("name", sorted(INTS))
def test_integer_types_match_ml_dtypes(name):
    dtype, _, fmt = INTS[name]
    mask = MASKS[fmt]
    bits = np.arange(mask + 1, dtype=np.uint8)
    values = np.empty(bits.size, np.int64)
    _int_codes(bits, fmt, values)
    np.testing.assert_array_equal(values, bits.view(dtype).astype(np.int64))
    x = np.concatenate([np.arange(-40, 40) * 0.25, [np.nan, np.inf, -np.inf, 1e9, -1e9, 3e9, -3e9,
                                                   2.0 ** 31, -2.0 ** 31, 300.0, -129.0]])
    for source in (np.float32, np.float64):
        got = np.empty(x.size, np.uint8)
        _from_float(x.astype(source), mask, got)
        with np.errstate(invalid="ignore"):
            np.testing.assert_array_equal(got, x.astype(source).astype(dtype).view(np.uint8))
    for source in (np.int8, np.uint8, np.int32, np.int64, np.uint64):
        n = np.array([0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 127], source)
        if np.dtype(source).kind == "i":
            n = np.concatenate([n, -n]).astype(source)
        got = np.empty(n.size, np.uint8)
        _from_int(n, mask, got)
        np.testing.assert_array_equal(got, n.astype(dtype).view(np.uint8))


# ---- whole models against the reference ---------------------------------------------------------
def _model(nodes, inputs, outputs, initializer=(), opset=25):
    graph = helper.make_graph(nodes, "bits", inputs, outputs, initializer=list(initializer))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 11
    return model


def _check(model, feeds):
    got = backend.prepare(model).run(list(feeds.values()))
    want = ReferenceEvaluator(model).run(None, feeds)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w)
        else:
            _same_floats(g.astype(np.float32), w.astype(np.float32))
    return got


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("name", ["e4m3fn", "e5m2fnuz", "e2m1", "int4", "uint2"])
def test_cast_round_trip_model(name, saturate):
    """float32 -> T -> float16 and T itself out, in one fused loop, against the reference."""
    dtype, onnx_type, _ = {**FLOATS, **INTS}[name]
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(61) * 100, [np.nan, np.inf, -np.inf]])
    x = x.astype(np.float32)
    x = x.reshape(4, 16)
    nodes = [helper.make_node("Cast", ["x"], ["t"], to=onnx_type, saturate=saturate),
             helper.make_node("Cast", ["t"], ["y"], to=TensorProto.FLOAT16)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                   [helper.make_tensor_value_info("t", onnx_type, [4, 16]),
                    helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 16])])
    with np.errstate(all="ignore"):
        t, _ = _check(model, {"x": x})
    assert t.dtype == np.dtype(dtype)


@pytest.mark.parametrize("pair", [("e4m3fn", "e5m2"), ("e5m2", "e2m1"), ("int4", "e4m3fnuz"),
                                  ("e2m1", "int2")])
def test_cast_between_narrow_types(pair):
    src, dst = ({**FLOATS, **INTS}[n] for n in pair)
    x = _patterns(src[0]).view(src[0])
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=dst[1])],
                   [helper.make_tensor_value_info("x", src[1], [x.size])],
                   [helper.make_tensor_value_info("y", dst[1], [x.size])])
    with np.errstate(all="ignore"):
        _check(model, {"x": x})


def test_casts_from_integers_bool_and_float64():
    """Integer sources wrap into int4/uint2 and round into float8; bool gives 0/1; float64
    rounds through float32 into the float types (as ml_dtypes), truncates into int4; float16
    quantizes into float8."""
    i = np.array([-300, -129, -9, -8, -1, 0, 1, 7, 8, 17, 255, 100000], np.int32)
    b = np.array([True, False] * 6)
    d = np.array([1 + 2.0 ** -4 + 2.0 ** -30, 1 + 2.0 ** -4, 300.5, -7.99, 1e300, 2.0 ** -10,
                  -0.0, 3.5, 2.5, 1e-300, 6.25, 463.99999], np.float64)
    h = np.linspace(-500, 500, 12).astype(np.float16)
    casts = [("i", "i4", TensorProto.INT4), ("i", "u2", TensorProto.UINT2),
             ("i", "f8", TensorProto.FLOAT8E4M3FN), ("b", "b4", TensorProto.UINT4),
             ("b", "bf", TensorProto.FLOAT8E5M2), ("d", "d8", TensorProto.FLOAT8E4M3FN),
             ("d", "d4", TensorProto.FLOAT4E2M1), ("d", "di", TensorProto.INT4)]
    nodes = [helper.make_node("Cast", [src], [dst], to=to) for src, dst, to in casts]
    nodes.append(helper.make_node("QuantizeLinear", ["h", "hs", "hz"], ["hq"]))
    model = _model(nodes, [helper.make_tensor_value_info("i", TensorProto.INT32, [12]),
                           helper.make_tensor_value_info("b", TensorProto.BOOL, [12]),
                           helper.make_tensor_value_info("d", TensorProto.DOUBLE, [12]),
                           helper.make_tensor_value_info("h", TensorProto.FLOAT16, [12])],
                   [helper.make_tensor_value_info(dst, to, [12]) for _, dst, to in casts]
                   + [helper.make_tensor_value_info("hq", TensorProto.FLOAT8E4M3FN, [12])],
                   [numpy_helper.from_array(np.array(0.75, np.float16), "hs"),
                    numpy_helper.from_array(np.array(0, np.float32).astype(
                        ml_dtypes.float8_e4m3fn), "hz")])
    with np.errstate(all="ignore"):
        _check(model, {"i": i, "b": b, "d": d, "h": h})


def test_e8m0_cast_round_modes():
    x = np.concatenate([np.random.default_rng(4).standard_normal(50) * 1e3,
                        [0.0, 1.0, 1.5, 0.75, 3.0, np.nan, np.inf, 3e38]]).astype(np.float32)
    for mode in ("up", "nearest", "down"):
        model = _model([helper.make_node("Cast", ["x"], ["t"], to=TensorProto.FLOAT8E8M0,
                                         round_mode=mode),
                        helper.make_node("Cast", ["t"], ["y"], to=TensorProto.FLOAT)],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [x.size])])
        _check(model, {"x": x})


@pytest.mark.parametrize("name", ["int4", "uint4", "e4m3fn", "e2m1"])
def test_quantize_dequantize_per_axis(name):
    """Per-axis scales with a zero point of the narrow type, then back to float32."""
    dtype, onnx_type, _ = {**FLOATS, **INTS}[name]
    x = (np.random.default_rng(5).standard_normal((3, 4, 5)) * 8).astype(np.float32)
    scale = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    zp = np.array([1, -1, 0, 2] if name == "int4" else [0, 3, 1, 2] if name == "uint4" else [0] * 4,
                  np.float32).astype(dtype)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape)),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])],
                   [helper.make_tensor_value_info("q", onnx_type, list(x.shape)),
                    helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))],
                   [numpy_helper.from_array(zp, "z")])
    _check(model, {"x": x, "s": scale})


@pytest.mark.parametrize("name", ["int4", "uint2", "e5m2"])
def test_quantize_dequantize_blocked(name):
    """Blocked quantization (block_size 2 on axis 1) with zero points of the narrow type as a
    graph input, float16 scales."""
    dtype, onnx_type, _ = {**FLOATS, **INTS}[name]
    x = (np.random.default_rng(6).standard_normal((3, 6)) * 4).astype(np.float16)
    scale = np.array([[0.5, 1.0, 2.0], [1.5, 0.25, 3.0], [1.0, 1.0, 0.75]], np.float16)
    zp = np.zeros((3, 3), np.float32)
    if name != "e5m2":
        zp[:, 1] = 1
    zp = zp.astype(dtype)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=1, block_size=2),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=2)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [3, 6]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT16, [3, 3]),
                           helper.make_tensor_value_info("z", onnx_type, [3, 3])],
                   [helper.make_tensor_value_info("q", onnx_type, [3, 6]),
                    helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3, 6])])
    _check(model, {"x": x, "s": scale, "z": zp})


def test_movement_ops_keep_bit_patterns_and_weights_convert():
    """Transpose / Reshape / Unsqueeze / Pad / Flatten on float8 and int4 inputs pass the bits
    through (Pad's constant is encoded); a float8 initializer (a weight) and a one-element int4
    zero point (inlined as a literal) dequantize as the reference does."""
    x = np.arange(256, dtype=np.uint8).reshape(4, 8, 8).view(ml_dtypes.float8_e4m3fn)
    x4 = np.arange(16, dtype=np.uint8).reshape(2, 8).view(ml_dtypes.int4)
    w = np.linspace(-300, 300, 24).astype(np.float32).astype(ml_dtypes.float8_e4m3fn).reshape(4, 6)
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[2, 0, 1]),
             helper.make_node("Reshape", ["a", "shape"], ["b"]),
             helper.make_node("Unsqueeze", ["b", "axes"], ["c"]),
             helper.make_node("Pad", ["c", "pads", "fill"], ["e"]),
             helper.make_node("Flatten", ["x4"], ["f4"], axis=0),
             helper.make_node("Pad", ["f4", "pads2"], ["e4"], mode="reflect"),
             helper.make_node("DequantizeLinear", ["w", "s"], ["dw"]),
             helper.make_node("DequantizeLinear", ["x4", "s", "zp4"], ["dq"])]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(2, np.int8).astype(ml_dtypes.int4), "zp4"),
             numpy_helper.from_array(np.array([4, 64], np.int64), "shape"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([0, 1, 2, 0, 0, 3], np.int64), "pads"),
             numpy_helper.from_array(np.array([0, 2, 0, 1], np.int64), "pads2"),
             numpy_helper.from_array(np.array(-1.75, np.float32).astype(ml_dtypes.float8_e4m3fn),
                                     "fill"),
             numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT8E4M3FN, [4, 8, 8]),
                           helper.make_tensor_value_info("x4", TensorProto.INT4, [2, 8])],
                   [helper.make_tensor_value_info("e", TensorProto.FLOAT8E4M3FN, None),
                    helper.make_tensor_value_info("e4", TensorProto.INT4, None),
                    helper.make_tensor_value_info("dw", TensorProto.FLOAT, None),
                    helper.make_tensor_value_info("dq", TensorProto.FLOAT, None)], inits)
    e, e4, _, _ = _check(model, {"x": x, "x4": x4})
    assert e.dtype == np.dtype(ml_dtypes.float8_e4m3fn) and e4.dtype == np.dtype(ml_dtypes.int4)


def test_arithmetic_on_bit_patterns_is_refused():
    """An untyped input (onnx's inference cannot check the model) fed float8 to Add: refused at
    lowering, not computed on the bit patterns."""
    model = _model([helper.make_node("Add", ["x", "x"], ["y"])],
                   [helper.make_empty_tensor_value_info("x")],
                   [helper.make_empty_tensor_value_info("y")])
    with pytest.raises(LoweringError, match="bit patterns"):
        backend.prepare(model).run([np.ones(3, ml_dtypes.float8_e4m3fn)])
