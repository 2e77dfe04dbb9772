"""Scatter, TopK, Einsum and assorted tensor ops against onnx's reference evaluator."""
import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from onnxjit.errors import LoweringError

from helpers import check_reference, model_of

RNG = np.random.default_rng(3)
INTS = (np.int8, np.uint8, np.int32, np.int64, np.uint64)


def arr(shape, dtype=np.float32, low=0, high=10):
    """Random test data: small integers for int types (so ties occur), normals for floats."""
    if np.dtype(dtype).kind in "iub":
        return RNG.integers(low, high, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def i64(*v):
    return np.array(v, np.int64)


def check(model, feeds):
    check_reference(model, feeds, atol=1e-6)


def scatter_elements_case(dtype, axis, reduction, ishape=(2, 3), dshape=(3, 4)):
    """data, indices (with negatives and duplicates) and updates for ScatterElements."""
    n = dshape[axis]
    idx = RNG.integers(-n, n, ishape).astype(np.int64)
    return [arr(dshape, dtype), idx, arr(ishape, dtype)]


def maxpool_indices(x, kernel, strides):
    """MaxPool's values and flat indices of x (MaxUnpool's inputs), from the reference."""
    node = helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=kernel, strides=strides)
    graph = helper.make_graph([node], "p", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_empty_tensor_value_info(o) for o in ("v", "i")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    return ReferenceEvaluator(model).run(None, {"x": x})


X = arr((3, 4))
POOL_V, POOL_I = maxpool_indices(arr((1, 2, 4, 6)), [2, 2], [2, 2])
POOL1_V, POOL1_I = arr((2, 1, 3)), RNG.permutation(12)[:6].reshape(2, 1, 3).astype(np.int64)

# (id, op, run-time inputs, const inputs {position: array}, attributes, opset, outputs)
CASES = [
    ("scatter_elements_f64_axis0", "ScatterElements", scatter_elements_case(np.float64, 0, "none"), {}, {}, 18, 1),
    ("scatter_elements_axis1_small_idx", "ScatterElements",
     scatter_elements_case(np.float32, 1, "none", (2, 3), (3, 4)), {}, {"axis": 1}, 18, 1),
    ("scatter_elements_axis_neg_3d", "ScatterElements",
     scatter_elements_case(np.float32, 2, "none", (2, 1, 3), (2, 3, 5)), {}, {"axis": -1}, 18, 1),
    ("scatter_elements_i32_idx", "ScatterElements",
     [X, np.array([[2, -1], [0, 1]], np.int32), arr((2, 2))], {}, {"axis": 0}, 13, 1),
    ("scatter_elements_bool", "ScatterElements",
     [arr((3, 4), np.bool_, 0, 2), i64(0, 2, 1)[None, :], arr((1, 3), np.bool_, 0, 2)], {}, {"axis": 1}, 18, 1),
    ("scatter_elements_const_idx", "ScatterElements", [X, arr((1, 4))], {1: i64(2, 0, 1, 1)[None, :]}, {}, 18, 1),
    ("scatternd_none_slices", "ScatterND", [arr((4, 3, 2)), i64(3, -1)[:, None], arr((2, 3, 2))], {}, {}, 18, 1),
    ("scatternd_elements", "ScatterND", [arr((4, 3)), i64(0, 1, 3, 2, -4, -3).reshape(3, 2),
                                         arr((3,))], {}, {}, 18, 1),
    ("scatternd_2d_idx", "ScatterND", [arr((4, 3, 2)), i64(0, 1, 3, 2).reshape(2, 1, 2),
                                       arr((2, 1, 2))], {}, {}, 16, 1),
    ("scatternd_opset11", "ScatterND", [arr((5,), np.int32), i64(4, 0)[:, None], arr((2,), np.int32)], {}, {}, 11, 1),
    ("tensorscatter_linear_4d", "TensorScatter", [arr((2, 3, 6, 4)), arr((2, 3, 2, 4)), i64(0, 4)], {}, {}, 24, 1),
    ("tensorscatter_circular", "TensorScatter", [arr((2, 5, 3)), arr((2, 3, 3)), i64(4, 2)], {},
     {"mode": "circular"}, 24, 1),
    ("tensorscatter_no_indices", "TensorScatter", [arr((2, 5, 3), np.float64),
                                                   arr((2, 2, 3), np.float64)], {}, {}, 24, 1),
    ("tensorscatter_axis", "TensorScatter", [arr((2, 5, 3), np.int32), arr((2, 5, 1), np.int32), i64(1, 2)],
     {}, {"axis": 2}, 24, 1),
    ("topk_opset1", "TopK", [arr((3, 5))], {}, {"k": 2}, 1, 2),
    ("topk_opset10_axis0", "TopK", [arr((5, 3), np.float64)], {1: i64(3)}, {"axis": 0}, 10, 2),
    ("topk_smallest_ties", "TopK", [arr((3, 8), np.int64, 0, 3)], {1: i64(5)}, {"largest": 0}, 11, 2),
    ("topk_largest_ties", "TopK", [arr((2, 8, 2), np.int32, 0, 3)], {1: i64(4)}, {"axis": 1}, 11, 2),
    ("topk_k_full_unsorted", "TopK", [arr((4, 3))], {1: i64(3)}, {"sorted": 0}, 11, 2),
    ("topk_k_zero", "TopK", [arr((4, 3))], {1: i64(0)}, {}, 11, 2),
    ("topk_uint8", "TopK", [arr((6,), np.uint8)], {1: i64(2)}, {"largest": 0}, 24, 2),
    ("topk_k_graph_input", "TopK", [arr((3, 5)), i64(2)], {}, {"axis": -1}, 24, 2),
    ("reversesequence_time", "ReverseSequence", [arr((5, 3, 2)), i64(5, 0, 3)], {},
     {"batch_axis": 1, "time_axis": 0}, 10, 1),
    ("reversesequence_batch", "ReverseSequence", [arr((3, 4), np.int64), i64(1, 4, 2)], {},
     {"batch_axis": 0, "time_axis": 1}, 10, 1),
    ("center_crop_pad_mixed", "CenterCropPad", [arr((5, 6, 2))], {1: i64(2, 9, 2)}, {}, 18, 1),
    ("center_crop_pad_axes", "CenterCropPad", [arr((2, 7, 4), np.int32)], {1: i64(4, 5)}, {"axes": [-2, 2]}, 18, 1),
    ("center_crop_pad_same", "CenterCropPad", [arr((2, 3))], {1: i64(2, 3)}, {}, 18, 1),
    ("center_crop_pad_runtime_shape", "CenterCropPad", [arr((6, 4)), i64(3, 7)], {}, {}, 18, 1),
    ("col2im_2d", "Col2Im", [arr((2, 6, 12))], {1: i64(4, 5), 2: i64(1, 3)}, {}, 18, 1),
    ("col2im_strides_pads", "Col2Im", [arr((1, 8, 9), np.float64)], {1: i64(5, 5), 2: i64(2, 2)},
     {"strides": [2, 2], "pads": [1, 0, 0, 1]}, 18, 1),
    ("col2im_dilations", "Col2Im", [arr((1, 4, 16))], {1: i64(6, 7), 2: i64(2, 2)}, {"dilations": [2, 3]}, 18, 1),
    ("col2im_3d", "Col2Im", [arr((1, 4, 12))], {1: i64(3, 4, 5), 2: i64(1, 2, 2)}, {"strides": [1, 2, 2]}, 18, 1),
    ("maxunpool_2d", "MaxUnpool", [POOL_V, POOL_I], {}, {"kernel_shape": [2, 2], "strides": [2, 2]}, 11, 1),
    ("maxunpool_output_shape", "MaxUnpool", [POOL_V, POOL_I], {2: i64(1, 2, 5, 7)},
     {"kernel_shape": [2, 2], "strides": [2, 2]}, 22, 1),
    ("maxunpool_1d_pads", "MaxUnpool", [POOL1_V, POOL1_I], {}, {"kernel_shape": [3], "strides": [2],
                                                               "pads": [0, 1]}, 9, 1),
    ("det_2d", "Det", [arr((3, 3))], {}, {}, 22, 1),
    ("det_nd_f64", "Det", [arr((2, 3, 4, 4), np.float64)], {}, {}, 11, 1),
    ("det_1x1", "Det", [arr((2, 1, 1))], {}, {}, 22, 1),
    ("cumprod_axis1", "CumProd", [arr((2, 3, 4))], {1: np.array(1, np.int64)}, {}, 26, 1),
    ("cumprod_runtime_axis_f64", "CumProd", [arr((3, 4), np.float64), np.array(-1, np.int32)], {},
     {"exclusive": 1}, 26, 1),
    ("cumprod_reverse_int", "CumProd", [arr((3, 4), np.int64, 1, 5)], {1: np.array(0, np.int64)},
     {"reverse": 1}, 26, 1),
    ("cumprod_reverse_exclusive_u32", "CumProd", [arr((6,), np.uint32, 1, 4)],
     {1: np.array(0, np.int32)},
     {"reverse": 1, "exclusive": 1}, 26, 1),
]

for _red in ("add", "mul", "max", "min"):
    CASES.append((f"scatter_elements_{_red}", "ScatterElements",
                  scatter_elements_case(np.float32, 1, _red, (3, 6), (3, 4)), {},
                  {"axis": 1, "reduction": _red}, 18, 1))
    CASES.append((f"scatternd_{_red}_dup", "ScatterND",
                  [arr((4, 2), np.float64), i64(1, -3, 3, 0)[:, None], arr((4, 2), np.float64)], {},
                  {"reduction": _red}, 18, 1))
for _dt in INTS:
    CASES.append((f"scatter_elements_add_{np.dtype(_dt).name}", "ScatterElements",
                  scatter_elements_case(_dt, 0, "add", (4, 4), (3, 4)), {}, {"reduction": "add"}, 16, 1))
    CASES.append((f"scatternd_max_{np.dtype(_dt).name}", "ScatterND",
                  [arr((3, 4), _dt), i64(2, 1, 0, 3, 2, 1).reshape(3, 2), arr((3,), _dt)], {},
                  {"reduction": "max"}, 18, 1))
    CASES.append((f"topk_{np.dtype(_dt).name}", "TopK", [arr((3, 6), _dt, 0, 4)], {1: i64(4)}, {}, 11, 2))

# Einsum: (equation, operand shapes)
EINSUMS = [
    ("ij->ji", [(3, 4)]), ("ij->i", [(3, 4)]), ("ij->", [(3, 4)]), ("...ii ->...i", [(3, 5, 5)]),
    ("ii", [(4, 4)]), ("iij->j", [(3, 3, 2)]), ("i,i", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]),
    ("bij, bjk -> bik", [(5, 2, 3), (5, 3, 4)]), ("ij,jk", [(2, 3), (3, 4)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]), ("bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]), ("...ij,...jk->...ik", [(1, 3, 4), (5, 4, 2)]),
    ("ij,kj->", [(3, 4), (2, 4)]), ("Ab,bA->A", [(3, 2), (2, 3)]), ("i...,i...->...", [(3, 2, 2), (3, 1, 2)]),
    ("ijk,jil->kl", [(3, 4, 2), (4, 3, 5)]),
]
for _i, (_eq, _shapes) in enumerate(EINSUMS):
    for _dt in [(np.float32, np.float64, np.int64, np.int32)[_i % 4]]:
        CASES.append((f"einsum_{_i}_{np.dtype(_dt).name}", "Einsum", [arr(s, _dt, -3, 4) for s in _shapes],
                      {}, {"equation": _eq}, 12, 1))
CASES.append(("einsum_scalar", "Einsum", [np.array(2.5)], {}, {"equation": "->"}, 12, 1))


@pytest.mark.parametrize("op,inputs,consts,attrs,opset,n_out",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_op_matches_reference(op, inputs, consts, attrs, opset, n_out):
    check(*model_of(op, inputs, consts, attrs, opset, n_out))


@pytest.mark.parametrize("opset,axis,dtype", [(9, 0, np.int64), (10, 1, np.float32)])
def test_deprecated_scatter_matches_scatter_elements(opset, axis, dtype):
    inputs = scatter_elements_case(dtype, axis, "none")
    model, feeds = model_of("Scatter", inputs, attrs={"axis": axis}, opset=opset)
    # The reference evaluator has no Scatter: its successor ScatterElements is the oracle.
    oracle = model_of("ScatterElements", inputs, attrs={"axis": axis}, opset=11)[0]
    expected = ReferenceEvaluator(oracle).run(None, {f"x{i}": a for i, a in enumerate(feeds)})[0]
    np.testing.assert_array_equal(onnxjit.backend.prepare(model).run(feeds)[0], expected)


# Run-time indices out of range: (id, op, inputs, attributes, opset)
OUT_OF_RANGE = [
    ("scatter_elements", "ScatterElements", [X, i64(3, 0)[None, :], arr((1, 2))], {}, 18),
    ("scatter_elements_neg", "ScatterElements", [X, i64(0, -5)[None, :], arr((1, 2))], {"axis": 1}, 18),
    ("scatternd", "ScatterND", [X, i64(0, 4)[None, :], arr((1,))], {}, 18),
    ("tensorscatter", "TensorScatter", [arr((2, 4, 3)), arr((2, 2, 3)), i64(0, 3)], {}, 24),
    ("reversesequence", "ReverseSequence", [arr((3, 2)), i64(1, 4)], {}, 10),
    ("maxunpool", "MaxUnpool", [POOL_V, POOL_I + 48], {"kernel_shape": [2, 2], "strides": [2, 2]}, 11),
]


@pytest.mark.parametrize("op,inputs,attrs,opset", [c[1:] for c in OUT_OF_RANGE],
                         ids=[c[0] for c in OUT_OF_RANGE])
def test_index_out_of_range_raises(op, inputs, attrs, opset):
    rep = onnxjit.backend.prepare(model_of(op, inputs, attrs=attrs, opset=opset)[0])
    with pytest.raises(IndexError, match=op):
        rep.run(inputs)


def test_constant_index_out_of_range_fails_at_compile_time():
    model, feeds = model_of("ScatterElements", [X, arr((1, 2))], {1: i64(0, 7)[None, :]}, {"axis": 1})
    with pytest.raises(LoweringError, match="out of range"):
        onnxjit.backend.prepare(model).run(feeds)


@pytest.mark.parametrize("op,inputs,consts,attrs,message", [
    ("ScatterElements", [X, i64(0)[None, :], arr((1, 1))], {}, {"reduction": "sub"}, "reduction"),
    ("Einsum", [X], {}, {"equation": "ij,jk->ik"}, "operand"),
    ("Einsum", [X], {}, {"equation": "__import__('os')"}, "operand|equation"),
    ("Einsum", [X, arr((5, 2))], {}, {"equation": "ij,jk->ik"}, "conflicts"),
    ("TopK", [X], {1: i64(5)}, {}, "out of range|output"),   # (and one output of two)
])
def test_bad_attributes_fail_clearly(op, inputs, consts, attrs, message):
    """Refused with onnxjit's error naming what is wrong: at prepare's structure checks
    (ModelError, from onnx's inference) or at lowering (LoweringError)."""
    from onnxjit.errors import OnnxJitError
    model, feeds = model_of(op, inputs, consts, attrs)
    with pytest.raises(OnnxJitError, match=message):
        onnxjit.backend.prepare(model).run(feeds)
