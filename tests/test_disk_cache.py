"""A second process preparing the same model loads machine code from the disk cache."""
import json
import os
import re
import subprocess
import sys

import numpy as np
from helpers import chain_model

CHILD = r"""
import json, sys, onnx
import onnxjit.backend as backend
rep = backend.prepare(onnx.load(sys.argv[1]))
c = rep.compiled()
stats = c.module.run_graph.stats
print(json.dumps({"path": c.path, "hits": stats.cache_hits and sum(stats.cache_hits.values()),
                  "misses": stats.cache_misses and sum(stats.cache_misses.values())}))
"""


def _prepare_in_child(model_path, cache, code=CHILD):
    """Run `code` (which prints JSON last) in a new process on the cache dir `cache`."""
    env = dict(os.environ, ONNXJIT_CACHE_DIR=str(cache))
    if code is CHILD:       # it reads the njit entry's cache stats (a Python driver has none)
        env["ONNXJIT_ENTRY"] = "auto"
    out = subprocess.run([sys.executable, "-c", code, str(model_path)], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_from_disk(tmp_path):
    import onnx
    path = tmp_path / "chain.onnx"
    onnx.save(chain_model(dims=(3, 5)), path)
    first = _prepare_in_child(path, tmp_path / "cache")
    second = _prepare_in_child(path, tmp_path / "cache")
    assert first["path"] == second["path"] and first["path"].startswith(str(tmp_path / "cache"))
    assert first["misses"] >= 1 and not first["hits"]
    assert second["hits"] >= 1 and not second["misses"]


def long_model(blocks=16, dims=(1, 2, 6, 6)):
    """x -> blocks x (MaxPool 3x3 same-size -> Relu(Add(., x))) -> Flatten -> y: a graph too long
    for one njit entry (plan.MAX_SEGMENT_STATEMENTS), with a library call in every block."""
    import onnx
    from onnx import TensorProto, helper
    nodes, prev = [], "x"
    for i in range(blocks):
        nodes += [helper.make_node("MaxPool", [prev], [f"p{i}"], kernel_shape=[3, 3],
                                   pads=[1, 1, 1, 1]),
                  helper.make_node("Add", [f"p{i}", "x"], [f"s{i}"]),
                  helper.make_node("Relu", [f"s{i}"], [f"r{i}"])]
        prev = f"r{i}"
    nodes.append(helper.make_node("Flatten", [prev], ["y"]))
    graph = helper.make_graph(nodes, "long", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                             (dims[0], int(np.prod(dims[1:]))))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model


DRIVER_CHILD = r"""
import json, sys, numpy as np, onnx
from numba.core.dispatcher import Dispatcher
import onnxjit.backend as backend
rep = backend.prepare(onnx.load(sys.argv[1]))
c = rep.compiled()
jitted = [d for d in vars(c.module).values() if isinstance(d, Dispatcher)]
misses = sum(sum(d.stats.cache_misses.values()) for d in jitted)
hits = sum(sum(d.stats.cache_hits.values()) for d in jitted)
x = np.linspace(-1, 1, 72, dtype=np.float32).reshape(1, 2, 6, 6)
print(json.dumps({"hits": hits, "misses": misses, "y": rep.run([x])[0].tolist()}))
"""


def test_long_graph_python_driver(tmp_path, monkeypatch):
    """Past MAX_SEGMENT_STATEMENTS the entry is a Python driver: it calls library kernels itself
    (their machine code comes from the kernels' own cache, never compiled into the module), and
    fused kernels as shared kernels and the Flatten as a numpy reshape, so no njit segment is left;
    it deletes intermediates after their last use, matches the reference, and a second process
    loads every compiled function it calls from the disk cache."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    import onnxjit.backend as backend
    monkeypatch.setenv("ONNXJIT_CACHE_DIR", str(tmp_path / "cache"))
    model = long_model()
    x = np.linspace(-1, 1, 72, dtype=np.float32).reshape(1, 2, 6, 6)
    rep = backend.prepare(model)
    (got,) = rep.run([x])
    (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-6)

    with open(rep.compiled().path) as f:      # the module (rep.source() adds the fused kernels)
        source = f.read()
    driver = source[source.index("def run_graph("):]
    assert not driver.startswith("@") and "@__njit" not in driver
    assert driver.count("= __k_pool.maxpool_") == 16           # called from Python
    assert "@__njit" not in source                             # ... and no compiled code here
    assert driver.count("= fused_") == 16                      # a lone fused kernel: direct
    assert "segment_" not in source and "\n    del " in driver
    # the Flatten, a reshape: numpy in the driver (plan "view"), nothing to compile
    assert re.search(r"= __np.ascontiguousarray\(t\d+\)\.reshape\(\(1, 72\)\)", driver)

    path = tmp_path / "long.onnx"
    onnx.save(model, path)
    first = _prepare_in_child(path, tmp_path / "cache2", DRIVER_CHILD)
    second = _prepare_in_child(path, tmp_path / "cache2", DRIVER_CHILD)
    assert first["misses"] >= 1
    assert second["misses"] == 0 and second["hits"] >= 1
    np.testing.assert_allclose(np.array(second["y"], np.float32), want, rtol=1e-6)

