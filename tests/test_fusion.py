"""Fusion: elementwise chains become one loop; Conv absorbs BatchNormalization and Relu."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend


def _conv_bn_relu(extra_reader=False, with_bias=True, seed=0):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b"),
             numpy_helper.from_array(rng.random(4).astype(np.float32) + 0.5, "scale"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "shift"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "mean"),
             numpy_helper.from_array(rng.random(4).astype(np.float32) + 0.1, "var")]
    conv_in = ["x", "w", "b"] if with_bias else ["x", "w"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "cbr", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3, 8, 8])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("extra_reader", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_batchnorm_relu(extra_reader, with_bias):
    model = _conv_bn_relu(extra_reader, with_bias)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    rep = backend.prepare(model)
    for got, want in zip(rep.run([x]), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # views of a Conv's canonical 5-D operands aside (plan.Kernel.plumbing)
    kernels = [k for k in rep.compiled().kernels if not k.plumbing]
    if extra_reader:   # the Conv output is read twice: BN and Relu stay separate
        assert [k.kind for k in kernels] == ["call", "fused"]
    else:
        assert [k.kind for k in kernels] == ["call"]
        assert [op for _, op in kernels[0].nodes] == ["Conv", "BatchNormalization", "Relu"]


def test_elementwise_chain_is_one_flat_loop():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    nodes = [helper.make_node("Mul", ["x", "x"], ["a"]), helper.make_node("Exp", ["a"], ["b"]),
             helper.make_node("Sub", ["b", "x"], ["c"]), helper.make_node("Tanh", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [x], [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rep = backend.prepare(model)
    xv = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(rep.run([xv])[0], ReferenceEvaluator(model).run(None, {"x": xv})[0],
                               rtol=1e-6)
    (kernel,) = rep.compiled().kernels
    assert kernel.kind == "fused" and len(kernel.steps) == 4
    assert "for i0 in range(n0):" in rep.source() and "i1" not in rep.source()


def _residual_block(op, conv_last, residual_reader=False, stride=1, seed=0):
    """r = Relu(Conv(x)); y = Relu(op(Conv(r) or Conv(x), r)): a ResNet-style residual add.

    With conv_last the Add's operand order puts the shortcut Conv second (ResNet's downsample
    blocks); residual_reader makes the Add's output a second graph output.
    """
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[stride] * 2),
             helper.make_node("Relu", ["c1"], ["r"]),
             helper.make_node("Conv", ["r", "w2", "b2"], ["c2"]),
             helper.make_node(op, ["r", "c2"] if conv_last else ["c2", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if residual_reader:
        outputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, None))
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b2")]
    graph = helper.make_graph(nodes, "res", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3, 9, 9])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])


@pytest.mark.parametrize("op", ["Add", "Sum"])
@pytest.mark.parametrize("conv_last", [False, True])
@pytest.mark.parametrize("residual_reader", [False, True])
@pytest.mark.parametrize("stride", [1, 2])
def test_residual_add_relu_fuses_into_conv(op, conv_last, residual_reader, stride):
    model = _residual_block(op, conv_last, residual_reader, stride)
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 9)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})
    rep = backend.prepare(model)
    for got, want in zip(rep.run([x]), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    kernels = [k for k in rep.compiled().kernels if not k.plumbing]
    second = [op_type for _, op_type in kernels[1].nodes]
    from onnxjit.kernels.sgemm import has_avx512   # the 1x1 Conv runs on the packed AVX-512 GEMM
    assert ("__k_sgemm.conv1x1_packed_" in rep.source()) == has_avx512()
    if residual_reader:  # the sum is an output of its own: the final Relu stays separate
        assert [k.kind for k in kernels] == ["call", "call", "fused"]
        assert second == ["Conv", op]
    else:
        assert [k.kind for k in kernels] == ["call", "call"]
        assert second == ["Conv", op, "Relu"]


@pytest.mark.parametrize("scale_shape,shift_shape,folds", [
    ((4, 1, 1), (1, 4, 1, 1), True),      # per channel (Unsqueezed BN scale/shift, as in Inception)
    ((1,), (4, 1, 1), True),              # a scalar scale also folds
    ((1, 1, 8, 8), (4, 1, 1), False),     # per pixel: the Mul stays an elementwise step
])
@pytest.mark.parametrize("const_first", [False, True])
def test_constant_scale_and_shift_fold_into_conv(scale_shape, shift_shape, folds, const_first):
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(scale_shape).astype(np.float32), "s"),
             numpy_helper.from_array(rng.standard_normal(shift_shape).astype(np.float32), "t")]
    order = (lambda v, c: [c, v]) if const_first else (lambda v, c: [v, c])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", order("c", "s"), ["m"]),
             helper.make_node("Add", order("m", "t"), ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    graph = helper.make_graph(nodes, "affine", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    rep = backend.prepare(model)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-5)
    kinds = [k.kind for k in rep.compiled().kernels]
    assert kinds == (["call"] if folds else ["call", "fused"])


@pytest.mark.parametrize("bias_shape", [(5,), (1, 5), (), (1,), None])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("a_shape", [(3, 4), (2, 3, 4), (4,)])
def test_bias_and_relu_fuse_into_matmul(bias_shape, relu, a_shape):
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 5)).astype(np.float32), "w")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"])]
    last = "m"
    if bias_shape is not None:
        inits.append(numpy_helper.from_array(
            rng.standard_normal(bias_shape).astype(np.float32), "b"))
        nodes.append(helper.make_node("Add", ["b", last], ["a"]))
        last = "a"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["r"]))
        last = "r"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    graph = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(a_shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    x = rng.standard_normal(a_shape).astype(np.float32)
    rep = backend.prepare(model)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    fused = [op for k in rep.compiled().kernels for _, op in k.nodes if k.kind == "call"]
    # a bias of higher rank than the product broadcasts it to a new shape: that Add stays apart
    folds = bias_shape is not None and len(bias_shape) <= len(a_shape)
    expected = ["MatMul"] + (["Add"] if folds else []) + (["Relu"] if relu and
                                                           (folds or bias_shape is None) else [])
    assert fused[:len(expected)] == expected
    from onnxjit.kernels.sgemm import has_avx512
    packed = has_avx512()   # constant float32 weights: packed, whatever the row count
    assert ("__k_sgemm.sgemm_packed(" in rep.source()) == packed


def test_transformer_attention_reads_heads_in_place():
    """transformer_block's attention: Q, K^T and V head views and the merge of the heads are read
    and written by strides (no transposed copies), the 1/sqrt(d) scale runs inside the Softmax."""
    from onnxjit import models
    from onnxjit.kernels.sgemm import has_avx512
    if not has_avx512():
        pytest.skip("the bmm / softmax_f32 kernels are used on AVX-512 CPUs only")
    model = models.transformer_block()
    model.ir_version = 10
    rep = backend.prepare(model)
    src = rep.source()
    assert "__np.transpose(" not in src
    assert src.count("__k_bmm.bmm(") == 2
    assert "__k_matmul.matmul3(" not in src
    assert "softmax_f32(" in src and "), 0.125).reshape" in src
    x = np.random.default_rng(0).standard_normal((1, 128, 256)).astype(np.float32)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0],
                               rtol=1e-4, atol=1e-4)
