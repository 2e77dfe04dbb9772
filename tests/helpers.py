"""Small model builders shared by the tests."""
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


def check_reference(model, feeds, atol=0.0):
    """onnxjit's outputs equal onnx's ReferenceEvaluator's: dtype, shape and values (floats to
    rtol 1e-5 / 1e-12 for float32 / float64 plus `atol`; everything else exactly)."""
    from onnx.reference import ReferenceEvaluator

    import onnxjit.backend
    expected = ReferenceEvaluator(model).run(None, {i.name: a for i, a in zip(model.graph.input, feeds)})
    got = onnxjit.backend.prepare(model).run(feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, e.dtype, g.shape, e.shape)
        if e.dtype == np.float32:
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=atol)
        elif e.dtype == np.float64:
            np.testing.assert_allclose(g, e, rtol=1e-12, atol=atol)
        else:
            np.testing.assert_array_equal(g, e)


_STATS = """
import json
st = {name}.stats
print(json.dumps({{"hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values())}}))
"""


def numba_cache_runs(child, dispatcher, cache_dir):
    """Run `child` (Python source) in two fresh processes sharing NUMBA_CACHE_DIR=cache_dir;
    the Numba disk-cache {hits, misses} of `dispatcher` (a name in child) in each."""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    code = child + _STATS.format(name=dispatcher)

    def run():
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    return run(), run()
