"""The built-in suite's models (small sizes) on CUDA against the reference and the CPU rep, and
what the target shows of them (launches, kernel files, pooled buffers)."""
import os

import numpy as np
import pytest

import onnxjit.backend as backend
from onnxjit import models
from onnxjit.compile import cache_dir

from cuda_harness import check, rand

SMALL = {
    "one_node": models.one_node,
    "elementwise_chain": lambda: models.elementwise_chain(3, 8),
    "mlp": lambda: models.mlp(2, (6, 8, 8, 3)),
    "transformer_block": lambda: models.transformer_block(seq=3, d_model=8, heads=2, ffn=8),
    "small_cnn": lambda: models.small_cnn(6, (2, 3, 4), 3),
}


def feeds(model, seed=0):
    return {i.name: rand([d.dim_value for d in i.type.tensor_type.shape.dim], seed=seed)
            for i in model.graph.input}


@pytest.mark.parametrize("name", list(SMALL))
def test_builtin_model(name):
    model = SMALL[name]()
    check(model, feeds(model))


def test_source_shows_kernels_and_launches():
    rep = backend.prepare(SMALL["transformer_block"](), "CUDA")
    text = rep.source()
    assert "@__cuda.jit(cache=True)" in text            # a generated fused kernel
    assert "grid=" in text and "block=" in text           # launch configurations
    assert "layer_norm" in text and "softmax" in text and "gemm" in text
    files = os.listdir(os.path.join(cache_dir(), "cuda"))
    fused = [ln for ln in rep.compiled().launches if ln.source]
    assert fused and all(f"{ln.kernel_name}.py" in files for ln in fused)
    rows = rep.explain()
    assert len(rows) == len(rep.compiled().launches) and "LayerNormalization" in str(rows)
    view = rep._repr_html_()                               # the Jupyter view: the same listing
    assert view.startswith("<pre>") and "grid=" in view and "layer_norm" in view


def test_pool_reuses_buffers():
    """A chain of steps keeps a few intermediates live at a time, not one buffer per step."""
    model = SMALL["small_cnn"]()
    rep = backend.prepare(model, "CUDA")
    exe = rep.compiled()
    written = {id(w): w for ln in exe.launches for w in ln.writes}
    intermediates = [w for w in written.values() if all(w is not o for o in exe.program.outputs)]
    assert exe.pool_buffers <= 3 < len(intermediates)
    assert 0 < exe.pool_bytes < sum(w.size * 4 for w in intermediates)
    x = feeds(model)
    first = rep.run(x)[0]
    second = rep.run(x)[0]           # pooled buffers reused: same answer
    np.testing.assert_array_equal(first, second)
    assert rep.cache_info()["hits"] == 2     # compiled at prepare (static shapes), then hits


def test_signatures_for_symbolic_dims():
    from onnx import TensorProto, helper
    node = helper.make_node("Softmax", ["x"], ["y"], axis=-1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                          ["n", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    rep = backend.prepare(model, "CUDA")
    for n in (1, 3):
        x = rand((n, 4), seed=n)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(rep.run([x])[0], e / e.sum(-1, keepdims=True), rtol=1e-5)
    assert rep.cache_info()["signatures"] == 2


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "small_cnn"])
def test_replayed_runs_agree_with_reference(name, simulated):
    """Runs after the first replay the bound sequence (a CUDA graph on a GPU, the bound launches
    under the simulator or with cuda_graphs=False): new inputs each time, numpy and device."""
    from numba import cuda
    from onnx.reference import ReferenceEvaluator
    from cuda_harness import assert_close
    model = SMALL[name]()
    ref = ReferenceEvaluator(model)
    for graphs in (True, False):
        rep = backend.prepare(model, "CUDA", cuda_graphs=graphs)
        for seed in range(4):
            x = feeds(model, seed)
            want = ref.run(None, x)
            if seed % 2:
                got = [y.copy_to_host() for y in
                       rep.run({k: cuda.to_device(v) for k, v in x.items()})]
            else:
                got = rep.run(x)
            for g, w in zip(got, want):
                assert_close(g, w, f"{name} run {seed} graphs={graphs}")
        exe = rep.compiled()
        if graphs and not simulated:
            assert exe.graph is not None, exe.graph_error
            assert not exe.bind_errors, exe.bind_errors
        else:
            assert exe.graph is None
