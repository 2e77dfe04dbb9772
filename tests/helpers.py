"""The tests' shared harness: one-node model builders (node_model, model_of, one_node), the
checker against onnx's ReferenceEvaluator with per-dtype tolerances (check_reference,
assert_outputs_match, TOLERANCES), and a Numba disk-cache probe."""
import contextlib

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper

NP_TO_ONNX = {np.dtype(k): v for k, v in {
    np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int8: TensorProto.INT8,
    np.int16: TensorProto.INT16, np.int32: TensorProto.INT32, np.int64: TensorProto.INT64,
    np.uint8: TensorProto.UINT8, np.uint16: TensorProto.UINT16, np.uint32: TensorProto.UINT32,
    np.uint64: TensorProto.UINT64, np.bool_: TensorProto.BOOL}.items()}


def node_model(op_type, inputs, n_outputs=1, opset=21, **attrs):
    """A one-node model whose inputs have the given arrays' dtypes and shapes."""
    names = [f"x{i}" for i in range(len(inputs))]
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, **attrs)
    graph = helper.make_graph(
        [node], op_type.lower(),
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], a.shape) for n, a in zip(names, inputs)],
        [helper.make_empty_tensor_value_info(o) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def chain_model(dims=(2, 3), input_name="x", output_name="y", node_name="n"):
    """x -> Add(x, x) -> Relu -> y, float32 of the given dims (ints or dim_param strings)."""
    x = helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(dims))
    y = helper.make_tensor_value_info(output_name, TensorProto.FLOAT, None)
    nodes = [helper.make_node("Add", [input_name, input_name], ["s"], name=node_name),
             helper.make_node("Relu", ["s"], [output_name], name=node_name + "_relu")]
    return helper.make_model(helper.make_graph(nodes, "chain", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 21)])


def model_of(op, inputs, consts=None, attrs=None, opset=21, n_out=1):
    """One-node model and its feeds. `inputs` are the run-time arrays in order (None = an absent
    optional input); `consts` {position: array} are initializers at those input positions."""
    consts = consts or {}
    names, graph_inputs, inits, feeds = [], [], [], []
    runtime, p = list(inputs), -1
    while runtime or p + 1 in consts:
        p += 1
        if p in consts:
            names.append(f"c{p}")
            inits.append(numpy_helper.from_array(np.asarray(consts[p]), f"c{p}"))
            continue
        a = runtime.pop(0)
        if a is None:
            names.append("")
            continue
        names.append(f"x{p}")
        graph_inputs.append(helper.make_tensor_value_info(
            f"x{p}", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape))
        feeds.append(a)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", graph_inputs,
                              [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model, feeds


# (rtol, atol) per output dtype for check_reference / assert_outputs_match; every other dtype
# (integers, bool, strings) compares exactly. Narrow floats' rtol is about their machine epsilon.
TOLERANCES = {
    np.dtype(ml_dtypes.bfloat16): (1e-2, 1e-3),
    np.dtype(np.float16): (1e-3, 1e-4),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-13),
    np.dtype(np.complex64): (1e-5, 1e-6),
    np.dtype(np.complex128): (1e-12, 1e-13),
}


def one_node(op, inputs, n_out=1, opset=21, consts=None, domain="", outputs=None, opsets=None,
             **attrs):
    """A one-node model by input names: `inputs` {name: array} are graph inputs, then `consts`
    {name: array} initializers, in that order on the node; an input whose array is None, or whose
    name is "" or starts with "_skip", is a left-out optional input. Outputs: `outputs` (names) or
    y0, y1, ... (`n_out` of them), no declared type. Opsets: `opsets` ((domain, version), ...), else
    `opset` for ai.onnx (and version 1 of `domain`, if any)."""
    consts = consts or {}
    absent = {k for k, v in inputs.items() if v is None or not k or k.startswith("_skip")}
    names = [("" if k in absent else k) for k in inputs] + [
        ("" if k.startswith("_skip") else k) for k in consts]
    outs = list(outputs) if outputs is not None else [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain or None, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items() if k not in absent],
        [helper.make_tensor_value_info(o, 0, None) for o in outs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    if opsets is None:
        opsets = [("", opset)] + ([(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def assert_outputs_match(got, expected, rtol=None, atol=None, same_dtype=True, names=None):
    """Outputs equal in number, dtype (unless not same_dtype), shape and values: floats and
    complex within TOLERANCES of the expected dtype (rtol / atol override it), the rest exactly.
    `names` label the outputs in failure messages (default: their positions)."""
    assert len(got) == len(expected), (len(got), len(expected))
    for i, (g, e) in enumerate(zip(got, expected)):
        i = names[i] if names else i
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape, (i, g.shape, e.shape)
        assert g.dtype == e.dtype or not same_dtype, (i, g.dtype, e.dtype)
        if e.dtype in TOLERANCES:
            default_rtol, default_atol = TOLERANCES[e.dtype]
            wide = np.complex128 if e.dtype.kind == "c" else np.float64
            np.testing.assert_allclose(g.astype(wide), e.astype(wide),
                                       rtol=default_rtol if rtol is None else rtol,
                                       atol=default_atol if atol is None else atol, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {i}")


def check_reference(model, feeds, atol=None, rtol=None, same_dtype=True, expected=None):
    """onnxjit's outputs equal onnx's ReferenceEvaluator's (or `expected`), as assert_outputs_match
    compares them. `feeds`: arrays in graph-input order, or {name: array}. Returns onnxjit's outputs."""
    from onnx.reference import ReferenceEvaluator

    import onnxjit.backend
    if isinstance(feeds, dict):       # a None value: an optional input left out
        feeds = {k: v for k, v in feeds.items() if v is not None}
    named = feeds if isinstance(feeds, dict) else {i.name: a for i, a in zip(model.graph.input, feeds)}
    if expected is None:
        expected = ReferenceEvaluator(model).run(None, named)
    got = onnxjit.backend.prepare(model).run(feeds)
    assert_outputs_match(got, expected, rtol=rtol, atol=atol, same_dtype=same_dtype)
    return got


_STATS = """
import json
st = {name}.stats
print(json.dumps({{"hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values())}}))
"""


def numba_cache_runs(child, dispatcher, cache_dir):
    """Run `child` (Python source, written to a script beside cache_dir so that functions it
    defines can be cached too) in two fresh processes sharing NUMBA_CACHE_DIR=cache_dir; the
    Numba disk-cache {hits, misses} of `dispatcher` (a name in child) in each."""
    import json
    import os
    import pathlib
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    script = pathlib.Path(cache_dir).parent / "numba_cache_child.py"
    script.write_text(child + _STATS.format(name=dispatcher))

    def run():
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    return run(), run()


@contextlib.contextmanager
def numba_threads(n):
    """Numba's thread count set to `n` (at most the pool's size) inside the block, restored
    after: the 1-thread / 2-thread comparisons of the parallel kernels' tests."""
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(old)


def concat_split_model(blocks=12, dims=(1, 2, 6, 6)):
    """blocks x (MaxPool -> Concat with x -> Split in two -> Relu(Add)) -> Flatten: library calls,
    data movement and fused kernels, too long for one njit entry (test_driver_calls,
    test_plan)."""
    nodes, prev = [], "x"
    for i in range(blocks):
        nodes += [helper.make_node("MaxPool", [prev], [f"p{i}"], kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Concat", [f"p{i}", "x"], [f"c{i}"], axis=1),
                  helper.make_node("Split", [f"c{i}", "sizes"], [f"a{i}", f"b{i}"], axis=1),
                  helper.make_node("Add", [f"a{i}", f"b{i}"], [f"s{i}"]),
                  helper.make_node("Relu", [f"s{i}"], [f"r{i}"])]
        prev = f"r{i}"
    nodes.append(helper.make_node("Flatten", [prev], ["y"]))
    sizes = numpy_helper.from_array(np.array([dims[1], dims[1]], np.int64), "sizes")
    graph = helper.make_graph(
        nodes, "concat_split", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [sizes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


# -- the pool and Conv kernels called as the lowerings call them ---------------------------------
# Canonical form (kernels/shapes.py): (N, C, *S) arrays as 5-D (N, C, D, H, W) views, 3-entry
# kernel / strides / dilations / output sizes, 6-entry pads, every argument given. A kernel test
# calling them so compiles the signatures a model's first use does, once per dtype.
def as5(a):
    """An (N, C, *S) array as the canonical (N, C, D, H, W) view."""
    from onnxjit.kernels import shapes
    return a.reshape(shapes.shape5(a.shape))


def from5(y, rank):
    """A kernel's canonical 5-D result in the caller's rank."""
    return y.reshape(y.shape[:2] + y.shape[7 - rank:])


def no_residual(dtype):
    """The empty residual the Conv lowering passes for none."""
    return np.empty((0,) * 5, dtype)


def conv5(kernel, x, w, b, strides, pads, dilations, *rest):
    """`kernel(x, w, b, strides, pads, dilations, *rest)` (conv.conv, depthwise.depthwise_conv,
    conv.conv_transpose) in the canonical form: x, w and an array of x's rank in `rest` (the
    residual) 5-D, the geometry 3 / 6 entries (give ConvTranspose's output_shape as
    shapes.spatial3(out)); the result in x's rank."""
    from onnxjit.kernels import shapes
    rest = [as5(r) if isinstance(r, np.ndarray) and r.ndim == x.ndim else r for r in rest]
    y = kernel(as5(x), as5(w), b, shapes.spatial3(strides), shapes.pads6(pads),
               shapes.spatial3(dilations), *rest)
    return from5(y, x.ndim)


def pool5(kernel, x, kernel_shape, strides, pads, dilations, out_shape, *rest):
    """A windowed pool entry (pool.maxpool_with_indices, the scheme entries) in the canonical
    form; its result(s) in x's rank."""
    from onnxjit.kernels import shapes
    y = kernel(as5(x), *shapes.window3(kernel_shape, strides, pads, dilations, out_shape), *rest)
    return tuple(from5(a, x.ndim) for a in y) if isinstance(y, tuple) else from5(y, x.ndim)
