"""Every CUDA lowering, one table row each: one-node models checked against onnx's
ReferenceEvaluator and onnxjit's CPU rep (tests/cuda/cuda_harness.py). Small shapes: under the
simulator every GPU thread runs in Python."""
import numpy as np
import pytest

from cuda_harness import check, node_model, rand

F32, F64, F16, I32, I64, B = (np.float32, np.float64, np.float16, np.int32, np.int64, np.bool_)


def row(name, op, inputs, consts=None, n_outputs=1, opset=21, **attrs):
    return pytest.param(op, inputs, consts or {}, n_outputs, opset, attrs, id=name)


# onnx's ReferenceEvaluator normalizes Softmax-11 over `axis` alone; the opset-11 spec (and
# onnxjit's CPU rep, the oracle for these rows) coerces to 2-D: [prod(:axis), prod(axis:)].
CPU_ORACLE_ONLY = {"softmax_opset11_coerced"}


ELEMENTWISE = [
    row("add_broadcast", "Add", {"a": rand((2, 3, 4)), "b": rand((3, 1), seed=1)}),
    row("sub_int64", "Sub", {"a": rand((3, 4), I64), "b": rand((4,), I64, seed=1)}),
    row("mul_int32_scalar", "Mul", {"a": rand((5,), I32), "b": rand((), I32, seed=1)}),
    row("div_float64", "Div", {"a": rand((2, 3), F64), "b": rand((2, 3), F64, seed=1, low=0.5)}),
    row("div_int_truncates", "Div", {"a": np.array([7, -7, 7, -7], I32),
                                     "b": np.array([2, 2, -2, -2], I32)}),
    row("mod_int", "Mod", {"a": np.array([7, -7, 5, -5], I64), "b": np.array([3, 3, -2, -2], I64)}),
    row("mod_float_fmod", "Mod", {"a": rand((6,)), "b": rand((6,), seed=1, low=0.5)}, fmod=1),
    row("pow", "Pow", {"a": rand((4,), low=0.1), "b": rand((4,), seed=1)}),
    row("max_nan", "Max", {"a": np.array([1, np.nan, 3], F32), "b": np.array([2, 0, np.nan], F32)}),
    row("min_3way", "Min", {"a": rand((2, 3)), "b": rand((3,), seed=1), "c": rand((2, 1), seed=2)}),
    row("sqrt", "Sqrt", {"x": rand((7,), low=0.0)}),
    row("exp_overflow", "Exp", {"x": np.array([0, 1, 100, -100, np.inf], F32)}),
    row("log", "Log", {"x": np.array([0, 0.5, 2, np.inf], F32)}),
    row("tanh", "Tanh", {"x": rand((9,))}),
    row("sigmoid", "Sigmoid", {"x": np.array([-100, -1, 0, 1, 100], F32)}),
    row("erf", "Erf", {"x": rand((8,))}),
    row("gelu_tanh", "Gelu", {"x": rand((8,))}, approximate="tanh"),
    row("floor", "Floor", {"x": rand((8,))}),
    row("ceil", "Ceil", {"x": rand((8,))}),
    row("round_half_even", "Round", {"x": np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, np.nan], F32)}),
    row("sign", "Sign", {"x": np.array([-2, 0, 3], F32)}),
    row("relu_int", "Relu", {"x": rand((6,), I32)}),
    row("leaky_relu", "LeakyRelu", {"x": rand((6,))}, alpha=0.2),
    row("elu", "Elu", {"x": rand((6,))}),
    row("hardswish", "HardSwish", {"x": rand((6,), low=-4, high=4)}),
    row("clip", "Clip", {"x": rand((6,))}, {"lo": np.array(-0.5, F32), "hi": np.array(0.5, F32)}),
    row("abs_int", "Abs", {"x": rand((6,), I64)}),
    row("neg", "Neg", {"x": rand((6,))}),
    row("equal_int", "Equal", {"a": rand((3, 4), I64), "b": rand((4,), I64, seed=1)}),
    row("less", "Less", {"a": rand((3, 4)), "b": rand((3, 4), seed=1)}),
    row("greater_or_equal", "GreaterOrEqual", {"a": rand((5,), I32), "b": rand((5,), I32, seed=1)}),
    row("and", "And", {"a": rand((4,), B), "b": rand((4,), B, seed=1)}),
    row("xor", "Xor", {"a": rand((2, 4), B), "b": rand((4,), B, seed=1)}),
    row("not", "Not", {"x": rand((5,), B)}),
    row("where", "Where", {"c": rand((2, 3), B), "x": rand((2, 3)), "y": rand((3,), seed=1)}),
    row("cast_float_to_int32", "Cast", {"x": np.array([1.7, -1.7, 1e10, np.nan], F32)}, to=6),
    row("cast_int_to_float", "Cast", {"x": rand((5,), I64)}, to=1),
    row("cast_bool_to_float", "Cast", {"x": rand((5,), B)}, to=1),
    row("cast_float_to_float16", "Cast", {"x": np.array([1.0001, 70000, 1e-8, -3.3], F32)}, to=10),
    row("add_float16", "Add", {"a": rand((2, 3), F16), "b": rand((3,), F16, seed=1)}),
    row("batchnorm_runtime_stats", "BatchNormalization",
        {"x": rand((2, 3, 2, 2)), "s": rand((3,), low=0.5), "b": rand((3,), seed=1),
         "m": rand((3,), seed=2), "v": rand((3,), seed=3, low=0.5, high=1.0)}),
]

MOVEMENT = [
    row("transpose_4d", "Transpose", {"x": rand((2, 3, 4, 5))}, perm=[0, 2, 3, 1]),
    row("transpose_default_int", "Transpose", {"x": rand((3, 4), I64)}),
    row("reshape", "Reshape", {"x": rand((2, 6))}, {"s": np.array([3, -1], I64)}),
    row("flatten", "Flatten", {"x": rand((2, 3, 4))}, axis=2),
    row("squeeze", "Squeeze", {"x": rand((1, 3, 1, 2))}, {"axes": np.array([0, 2], I64)}),
    row("unsqueeze", "Unsqueeze", {"x": rand((3, 2))}, {"axes": np.array([0, 3], I64)}),
    row("concat_axis1", "Concat", {"a": rand((2, 1, 3)), "b": rand((2, 2, 3), seed=1),
                                   "c": rand((2, 3, 3), seed=2)}, axis=1),
    row("concat_last_int", "Concat", {"a": rand((2, 2), I64), "b": rand((2, 3), I64, seed=1)},
        axis=-1),
    row("slice_steps", "Slice", {"x": rand((5, 6))},
        {"st": np.array([4, 1], I64), "en": np.array([0, 6], I64), "ax": np.array([0, 1], I64),
         "sp": np.array([-2, 2], I64)}),
    row("gather_axis1_negative", "Gather", {"x": rand((3, 4))},
        {"i": np.array([[0, -1], [2, 1]], I64)}, axis=1),
    row("gather_runtime_indices", "Gather", {"x": rand((5, 2)), "i": np.array([4, -5, 0], I32)}),
    row("expand", "Expand", {"x": rand((3, 1))}, {"s": np.array([2, 3, 4], I64)}),
    row("tile", "Tile", {"x": rand((2, 3))}, {"r": np.array([2, 2], I64)}),
    row("split", "Split", {"x": rand((5, 2))}, {"s": np.array([2, 3], I64)}, n_outputs=2),
    row("pad_constant", "Pad", {"x": rand((2, 3))}, {"p": np.array([1, 0, 0, 2], I64),
                                                     "v": np.array(9.0, F32)}),
    row("pad_reflect", "Pad", {"x": rand((3, 4))}, {"p": np.array([0, 2, 0, 1], I64)},
        mode="reflect"),
    row("pad_edge", "Pad", {"x": rand((3, 4))}, {"p": np.array([1, 1, 1, 1], I64)}, mode="edge"),
    row("identity", "Identity", {"x": rand((3,))}),
]

REDUCTIONS = [
    row("reduce_sum_noncontiguous_axes", "ReduceSum", {"x": rand((3, 4, 5))},
        {"axes": np.array([0, 2], I64)}, keepdims=0),
    row("reduce_mean_last", "ReduceMean", {"x": rand((3, 40))}, {"axes": np.array([-1], I64)}),
    row("reduce_max_int", "ReduceMax", {"x": rand((4, 5), I32)}, {"axes": np.array([1], I64)}),
    row("reduce_min_all", "ReduceMin", {"x": rand((4, 5))}),
    row("reduce_prod", "ReduceProd", {"x": rand((3, 4), low=0.5, high=1.5)},
        {"axes": np.array([0], I64)}),
    row("reduce_l2", "ReduceL2", {"x": rand((3, 4))}, {"axes": np.array([1], I64)}),
    row("reduce_log_sum_exp", "ReduceLogSumExp", {"x": rand((3, 4), low=50, high=60)},
        {"axes": np.array([1], I64)}),
    row("reduce_sum_square_middle", "ReduceSumSquare", {"x": rand((2, 3, 4))},
        {"axes": np.array([1], I64)}),
    row("argmax_last_index", "ArgMax", {"x": np.array([[1, 3, 3], [2, 2, 0]], F32)},
        axis=1, select_last_index=1),
    row("argmin_axis0", "ArgMin", {"x": rand((5, 3))}, axis=0, keepdims=0),
    row("global_average_pool", "GlobalAveragePool", {"x": rand((2, 3, 4, 5))}),
    row("global_max_pool", "GlobalMaxPool", {"x": rand((1, 2, 3, 3))}),
]

NN = [
    row("matmul_2d", "MatMul", {"a": rand((5, 7)), "b": rand((7, 6), seed=1)}),
    row("matmul_batch_broadcast", "MatMul",
        {"a": rand((2, 1, 3, 4)), "b": rand((3, 4, 2), seed=1)}),
    row("matmul_weights_shared", "MatMul", {"a": rand((2, 3, 5))}, {"w": rand((5, 4), seed=1)}),
    row("matmul_vector", "MatMul", {"a": rand((4,)), "b": rand((2, 4, 3), seed=1)}),
    row("matmul_int32", "MatMul", {"a": rand((3, 4), I32), "b": rand((4, 2), I32, seed=1)}),
    row("gemm_trans_bias", "Gemm", {"a": rand((6, 3)), "b": rand((5, 6), seed=1)},
        {"c": rand((5,), seed=2)}, transA=1, transB=1, alpha=0.5, beta=2.0),
    row("gemm_column_bias", "Gemm", {"a": rand((3, 6)), "b": rand((6, 5), seed=1),
                                     "c": rand((3, 1), seed=2)}),
    row("conv_pads_strides", "Conv", {"x": rand((1, 2, 6, 5))}, {"w": rand((3, 2, 3, 3), seed=1),
                                                                 "b": rand((3,), seed=2)},
        pads=[1, 0, 1, 2], strides=[2, 1]),
    row("conv_groups_dilations", "Conv", {"x": rand((2, 4, 5, 5)), "w": rand((4, 2, 2, 2), seed=1)},
        group=2, dilations=[2, 1]),
    row("conv_1x1", "Conv", {"x": rand((1, 3, 2, 3))}, {"w": rand((2, 3, 1, 1), seed=1)}),
    row("conv_1d_same", "Conv", {"x": rand((1, 2, 7))}, {"w": rand((2, 2, 3), seed=1)},
        auto_pad="SAME_UPPER"),
    row("maxpool_pads_ceil", "MaxPool", {"x": rand((1, 2, 5, 5))}, kernel_shape=[2, 2],
        strides=[2, 2], pads=[1, 1, 0, 0], ceil_mode=1),
    row("maxpool_uint8", "MaxPool", {"x": rand((1, 1, 4, 4), np.uint8)}, kernel_shape=[2, 2]),
    row("avgpool_count_pad", "AveragePool", {"x": rand((1, 2, 4, 4))}, kernel_shape=[3, 3],
        pads=[1, 1, 1, 1], count_include_pad=1),
    row("avgpool_exclude_pad", "AveragePool", {"x": rand((1, 1, 5, 4))}, kernel_shape=[2, 3],
        pads=[1, 1, 1, 1], strides=[2, 2]),
    row("softmax_axis1", "Softmax", {"x": rand((2, 3, 4), low=-50, high=50)}, axis=1),
    row("softmax_opset11_coerced", "Softmax", {"x": rand((2, 3, 4))}, opset=11, axis=1),
    row("log_softmax", "LogSoftmax", {"x": rand((3, 50))}),
    row("layernorm_stats", "LayerNormalization", {"x": rand((2, 3, 4))},
        {"s": rand((3, 4), seed=1), "b": rand((4,), seed=2)}, n_outputs=3, axis=1),
    row("layernorm_float64_no_bias", "LayerNormalization", {"x": rand((3, 5), F64)},
        {"s": rand((5,), F64, seed=1)}),
]


@pytest.mark.parametrize("op, inputs, consts, n_outputs, opset, attrs",
                         ELEMENTWISE + MOVEMENT + REDUCTIONS + NN)
def test_lowering(request, op, inputs, consts, n_outputs, opset, attrs):
    model = node_model(op, inputs, n_outputs, opset, consts, **attrs)
    check(model, inputs, reference=request.node.callspec.id not in CPU_ORACLE_ONLY)
