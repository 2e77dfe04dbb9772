"""A prepared model travels to Dask workers: pickled as model bytes and options, rebuilt lazily in
each worker process (compiling on its first run, or loading from the shared disk cache)."""
import os
import pickle

import dask.array as da
import numpy as np
import onnxruntime
from distributed import Client, LocalCluster
from onnx import TensorProto, helper, numpy_helper

import onnxjit
import onnxjit.backend as backend

TIMEOUT = 240      # seconds for the whole computation: two worker processes import and compile


def small_mlp():
    rng = np.random.default_rng(7)
    w = lambda name, *shape: numpy_helper.from_array(                      # noqa: E731
        (rng.standard_normal(shape) * 0.3).astype(np.float32), name)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Tanh", ["h1"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "dask_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [w("w1", 6, 12), w("b1", 12), w("w2", 12, 3), w("b2", 3)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    return model.SerializeToString()


def run_block(block, sess, rep):
    """One chunk of rows through the unpickled session and rep; the worker's pid in column 3."""
    y = sess.run(None, {"x": block})[0]
    np.testing.assert_allclose(rep.run([block])[0], y, rtol=1e-5, atol=1e-6)
    return np.concatenate([y, np.full((len(y), 1), os.getpid(), np.float32)], axis=1)


def test_session_runs_across_a_dask_local_cluster():
    model = small_mlp()
    batch = np.random.default_rng(8).standard_normal((96, 6)).astype(np.float32)
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": batch})[0]
    sess = onnxjit.InferenceSession(model)
    rep = backend.prepare(model, "CPU")
    assert len(pickle.dumps(sess)) < 2 * len(model) + 4096      # bytes and options, no code
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                      dashboard_address=None, worker_dashboard_address=None,
                      timeout=TIMEOUT) as cluster, Client(cluster, timeout=TIMEOUT) as client:
        rows = da.from_array(batch, chunks=(24, 6))
        out = rows.map_blocks(run_block, sess=sess, rep=rep, dtype=np.float32,
                              chunks=(rows.chunks[0], (4,)))
        got = client.compute(out).result(timeout=TIMEOUT)
        workers = set(client.run(os.getpid).values())
    np.testing.assert_allclose(got[:, :3], want, rtol=1e-5, atol=1e-6)
    pids = set(got[:, 3].astype(int).tolist())
    assert pids <= workers and os.getpid() not in pids       # every block ran in a worker process
