"""Fused kernels are generic over sizes, named by the hash of their text and shared: kernels that
differ only in shape are one definition, compiled once per machine for every model using it."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import pytest
from helpers import check_reference
from onnx import TensorProto, helper

import onnxjit.backend as backend
from onnxjit.fused import PARALLEL_MIN_ELEMENTS


def two_chains(shape_a, shape_b, op="Relu"):
    """y_a = op(Mul(a, a)), y_b = op(Mul(b, b)): two fused kernels of one structure."""
    nodes = []
    for x in "ab":
        nodes += [helper.make_node("Mul", [x, x], [f"m_{x}"]),
                  helper.make_node(op, [f"m_{x}"], [f"y_{x}"])]
    graph = helper.make_graph(
        nodes, "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(shape_a)),
                       helper.make_tensor_value_info("b", TensorProto.FLOAT, list(shape_b))],
        [helper.make_empty_tensor_value_info("y_a"), helper.make_empty_tensor_value_info("y_b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def bindings(source):
    """[(plan name, f_<hash>)] of the module's fused kernels."""
    return re.findall(r"^(fused_\w+) = __load_kernel\(__file__, '(f_[0-9a-f]+)'\)$", source, re.M)


def test_kernels_differing_in_shape_share_one_definition():
    model = two_chains((37, 41), (5, 7))
    rep = backend.prepare(model)
    source = rep.source()
    (first, name_a), (second, name_b) = bindings(source)
    assert name_a == name_b and first != second
    assert source.count("def f_") == 1
    kernel = source[source.index("def f_"):]
    assert not re.search(r"\b(37|41|1517|35)\b", kernel)     # no sizes in the text
    assert "for i0 in range(n0):" in kernel and "i1" not in kernel
    module = rep.compiled().module
    assert getattr(module, first) is getattr(module, second)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((37, 41)).astype(np.float32)
    b = rng.standard_normal((5, 7)).astype(np.float32)
    y_a, y_b = rep.run([a, b])
    np.testing.assert_array_equal(y_a, np.maximum(a * a, 0))
    np.testing.assert_array_equal(y_b, np.maximum(b * b, 0))


def test_structure_stays_in_the_text():
    """Different ops, dtypes, broadcasting or prange make different kernels."""
    big = (PARALLEL_MIN_ELEMENTS,)
    names = lambda model: {f for _, f in bindings(backend.prepare(model).source())}  # noqa: E731
    assert len(names(two_chains((4, 4), (2, 3), op="Relu"))) == 1
    assert names(two_chains((4, 4), (4,), op="Relu")) != names(two_chains((4, 4), (4,), op="Neg"))
    assert len(names(two_chains((8,), big))) == 2               # one with prange, one without
    assert "__prange(n0)" in backend.prepare(two_chains((8,), big)).source()


def test_other_models_reuse_the_dispatcher():
    first = backend.prepare(two_chains((6, 2), (5,)))
    second = backend.prepare(two_chains((9, 3), (4,)))
    one = first.compiled().module
    two = second.compiled().module
    assert one is not two
    assert one.fused_0_mul_relu is two.fused_0_mul_relu


@pytest.mark.parametrize("shapes", [
    [(3, 4), (4,)], [(3, 1), (1, 4)], [(2, 1, 5), (3, 1)], [(1, 1), (1,)], [(), (2, 3)],
    [(0, 3), (3,)], [(2, 0), (1, 1)], [(1, 4, 1, 5), (4, 1, 1)], [(2, 3, 4), (2, 3, 4)],
])
def test_broadcasting_shapes(shapes):
    """Sizes read from the arguments' shapes agree with the reference, whichever input spans
    which dim (scalars, empty dims, dims of size 1, inputs of lower rank)."""
    rng = np.random.default_rng(1)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    names = ["x0", "x1"]
    nodes = [helper.make_node("Sub", names, ["d"]), helper.make_node("Abs", ["d"], ["a"]),
             helper.make_node("Mul", ["a", "x1"], ["y"])]
    graph = helper.make_graph(nodes, "bc", [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in zip(names, shapes)],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    check_reference(model, feeds)


CHILD = r"""
import json, sys, onnx
from numba.core.dispatcher import Dispatcher
import onnxjit.backend as backend
rep = backend.prepare(onnx.load(sys.argv[1]))
module = rep.compiled().module
fused = module.fused_0_mul_relu
print(json.dumps({"file": fused.py_func.__code__.co_filename,
                  "hits": sum(fused.stats.cache_hits.values()),
                  "misses": sum(fused.stats.cache_misses.values())}))
"""


def _child(model_path, cache):
    env = dict(os.environ, ONNXJIT_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_path)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_and_model_reuse_the_kernel_from_disk(tmp_path):
    """Another model, with other shapes, in a new process: the kernel's machine code comes from
    Numba's disk cache of its file <cache>/f_<hash>.py."""
    paths = [tmp_path / "one.onnx", tmp_path / "two.onnx"]
    onnx.save(two_chains((6, 2), (5,)), paths[0])
    onnx.save(two_chains((9, 3), (4,)), paths[1])
    first = _child(paths[0], tmp_path / "cache")
    second = _child(paths[1], tmp_path / "cache")
    assert first["file"] == second["file"]
    assert os.path.basename(first["file"]).startswith("f_")
    assert first["misses"] >= 1 and first["hits"] == 0
    assert second["hits"] >= 1 and second["misses"] == 0


def test_integer_results_keep_ieee_arithmetic():
    """x * (1/s) is an ulp off x / s, and rounding to an integer turns that into a different value
    (25.5 -> 25): kernels with integer or bool results compile without fast-math flags."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [1])
    nodes = [helper.make_node("Div", ["x", "s"], ["d"]), helper.make_node("Round", ["d"], ["r"]),
             helper.make_node("Cast", ["r"], ["q"], to=TensorProto.UINT8),
             helper.make_node("Mul", ["x", "s"], ["m"])]
    graph = helper.make_graph(nodes, "q", [x, s], [helper.make_empty_tensor_value_info("q"),
                                                   helper.make_empty_tensor_value_info("m")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    source = backend.prepare(model).source()
    kernels = source.split("# The shared kernels bound above", 1)[1].split("@__njit")[1:]
    assert len(kernels) == 1 and "fastmath" not in kernels[0] and "__np.uint8(" in kernels[0]
    scale = np.float32(2.0 / 255.0)
    xs = (np.arange(6, dtype=np.float32) * 51 + 0.5) * scale     # ties, up to an ulp
    check_reference(model, [xs, np.array([scale], np.float32)])
