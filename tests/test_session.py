"""ONNX Runtime's Python API over onnxjit (onnxjit/session*.py): the same scripts run on both.

Each script below is written for ONNX Runtime and takes the module as `ort`; it runs once with
`onnxruntime` and once with `onnxjit`, and every answer (metadata, outputs, errors) must agree.
"""
import functools
import json
import os
import pickle
import subprocess
import sys
import threading
import warnings

import numba
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxjit
import onnxjit.backend as backend

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(18)


def _w(name, *shape, scale=0.3):
    """A seeded random float32 initializer (models are built once each: functools.cache)."""
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _finish(graph, opset=17, **props):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **props)
    model.ir_version = 10          # onnx 1.23 writes IR 14; ORT 1.32 reads up to 13
    return model.SerializeToString()


# -- the models -------------------------------------------------------------------------------------
@functools.cache
def mlp():
    """x [-1, 16] (Paddle2ONNX's dynamic dim) -> 2 dense layers; b2 is an overridable initializer."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]),
             helper.make_node("MatMul", ["h", "w2"], ["o0"]),
             helper.make_node("Add", ["o0", "b2"], ["o1"]),
             helper.make_node("Sigmoid", ["o1"], ["probs"])]
    b2 = _w("b2", 4)
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", F, [-1, 16]),
                       helper.make_tensor_value_info("b2", F, [4])],
        [helper.make_tensor_value_info("probs", F, None)],
        [_w("w1", 16, 32), _w("b1", 32), _w("w2", 32, 4), b2], doc_string="two dense layers")
    model = _finish(graph, producer_name="session-tests", producer_version="1.0", domain="test.mlp",
                    model_version=3, doc_string="an MLP")
    proto = onnx.ModelProto.FromString(model)
    helper.set_model_props(proto, {"author": "onnxjit", "task": "classify"})
    return proto.SerializeToString()


@functools.cache
def transformer():
    """int64 token and position ids ['batch', 'seq'] through Gather, one attention block."""
    d, vocab = 8, 24
    scale = numpy_helper.from_array(np.array(d ** -0.5, np.float32), "scale")
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["tok"]),
             helper.make_node("Gather", ["pos", "position_ids"], ["p"]),
             helper.make_node("Add", ["tok", "p"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "gamma", "beta"], ["ln"], axis=-1),
             helper.make_node("MatMul", ["ln", "wq"], ["q"]),
             helper.make_node("MatMul", ["ln", "wk"], ["k"]),
             helper.make_node("MatMul", ["ln", "wv"], ["v"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["s0"]),
             helper.make_node("Mul", ["s0", "scale"], ["s"]),
             helper.make_node("Softmax", ["s"], ["a"], axis=-1),
             helper.make_node("MatMul", ["a", "v"], ["ctx"]),
             helper.make_node("MatMul", ["ctx", "wo"], ["o"]),
             helper.make_node("Add", ["o", "h"], ["hidden"]),
             helper.make_node("MatMul", ["hidden", "unemb"], ["logits"])]
    gamma = numpy_helper.from_array(np.ones(d, np.float32), "gamma")
    beta = numpy_helper.from_array(np.zeros(d, np.float32), "beta")
    graph = helper.make_graph(
        nodes, "tiny_transformer",
        [helper.make_tensor_value_info("input_ids", I64, ["batch", "seq"]),
         helper.make_tensor_value_info("position_ids", I64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", F, ["batch", "seq", vocab]),
         helper.make_tensor_value_info("hidden", F, None)],
        [_w("emb", vocab, d), _w("pos", 16, d), gamma, beta, _w("wq", d, d), _w("wk", d, d),
         _w("wv", d, d), _w("wo", d, d), scale, _w("unemb", d, vocab)])
    return _finish(graph)


@functools.cache
def stateful():
    """One step of a recurrent cell: (x, state, step) -> (y, next state, step + 1); `step` is a
    declared scalar, `next_step` a 1-element vector (fed back as `step`, which ORT accepts)."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]),
             helper.make_node("Mul", ["state", "decay"], ["kept"]),
             helper.make_node("Add", ["xw", "kept"], ["pre"]),
             helper.make_node("Tanh", ["pre"], ["next_state"]),
             helper.make_node("Sigmoid", ["next_state"], ["gate"]),
             helper.make_node("Mul", ["gate", "x"], ["y"]),
             helper.make_node("Add", ["step", "one"], ["next_step"])]
    graph = helper.make_graph(
        nodes, "stateful",
        [helper.make_tensor_value_info("x", F, ["batch", 4]),
         helper.make_tensor_value_info("state", F, ["batch", 4]),
         helper.make_tensor_value_info("step", I64, [])],
        [helper.make_tensor_value_info("y", F, ["batch", 4]),
         helper.make_tensor_value_info("next_state", F, ["batch", 4]),
         helper.make_tensor_value_info("next_step", I64, [1])],
        [_w("w", 4, 4), numpy_helper.from_array(np.array(0.5, np.float32), "decay"),
         numpy_helper.from_array(np.array([1], np.int64), "one")])
    return _finish(graph)


@functools.cache
def lstm(hidden=8, seq=5, features=3):
    """A one-layer LSTM, hidden 8 over 5 steps; initial states are inputs; batch symbolic."""
    node = helper.make_node("LSTM", ["X", "W", "R", "B", "", "initial_h", "initial_c"],
                            ["Y", "Y_h", "Y_c"], hidden_size=hidden)
    graph = helper.make_graph(
        [node], "lstm",
        [helper.make_tensor_value_info("X", F, [seq, "batch", features]),
         helper.make_tensor_value_info("initial_h", F, [1, "batch", hidden]),
         helper.make_tensor_value_info("initial_c", F, [1, "batch", hidden])],
        [helper.make_tensor_value_info(n, F, None) for n in ("Y", "Y_h", "Y_c")],
        [_w("W", 1, 4 * hidden, features), _w("R", 1, 4 * hidden, hidden),
         _w("B", 1, 8 * hidden, scale=0.1)])
    return _finish(graph, opset=14)


# -- ORT-style scripts ----------------------------------------------------------------------------
def metadata(sess):
    """Every metadata answer a script can ask a session for."""
    meta = sess.get_modelmeta()
    args = lambda xs: [(a.name, a.type, a.shape, str(a)) for a in xs]   # noqa: E731
    return {"inputs": args(sess.get_inputs()), "outputs": args(sess.get_outputs()),
            "overridable": args(sess.get_overridable_initializers()),
            "meta": (meta.producer_name, meta.graph_name, meta.graph_description, meta.domain,
                     meta.description, meta.version, meta.custom_metadata_map),
            "providers": sess.get_providers(), "provider_options": sess.get_provider_options(),
            "options": [str(getattr(sess.get_session_options(), k)) for k in (
                "graph_optimization_level", "intra_op_num_threads", "execution_mode",
                "enable_profiling", "log_severity_level")]}


def script_mlp(ort, model):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = RNG_FEEDS["mlp"]
    name = sess.get_inputs()[0].name
    out = sess.run(None, {name: x})
    subset = sess.run([sess.get_outputs()[0].name], {name: x[:3]})
    override = sess.run(None, {name: x, "b2": np.full(4, -1.0, np.float32)})
    return metadata(sess), out + subset + override


def script_transformer(ort, model):
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    ids = RNG_FEEDS["ids"]
    positions = np.tile(np.arange(ids.shape[1], dtype=np.int64), (ids.shape[0], 1))
    logits, hidden = sess.run(["logits", "hidden"], {"input_ids": ids, "position_ids": positions})
    (hidden_again,) = sess.run(["hidden"], {"input_ids": ids[:, :3],
                                            "position_ids": positions[:, :3]})
    return metadata(sess), [logits, hidden, hidden_again]


def script_stateful(ort, model):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    state, step, ys = np.zeros((2, 4), np.float32), np.array(0, np.int64), []
    for x in RNG_FEEDS["steps"]:
        y, state, step = sess.run(None, {"x": x, "state": state, "step": step})
        ys.append(y)
    # ORT takes a tensor of any rank for a declared scalar (next_step is 1-d), and passes it on
    one = sess.run(["next_step"], {"x": x, "state": state, "step": np.array([[7]], np.int64)})
    return metadata(sess), ys + [state, step] + one


def script_lstm(ort, model):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x = RNG_FEEDS["seq"]
    h0 = np.zeros((1, x.shape[1], 8), np.float32)
    feeds = {"X": x, "initial_h": h0 + 0.1, "initial_c": h0 - 0.1}
    return metadata(sess), sess.run(None, feeds) + sess.run(["Y_h"], {**feeds, "X": x[:, :1],
                                                                      "initial_h": h0[:, :1],
                                                                      "initial_c": h0[:, :1]})


RNG_FEEDS = {
    "mlp": RNG.standard_normal((5, 16)).astype(np.float32),
    "ids": RNG.integers(0, 24, (2, 6)).astype(np.int64),
    "steps": [RNG.standard_normal((2, 4)).astype(np.float32) for _ in range(3)],
    "seq": RNG.standard_normal((5, 2, 3)).astype(np.float32),
}
SCRIPTS = {"mlp": (mlp, script_mlp), "transformer": (transformer, script_transformer),
           "stateful": (stateful, script_stateful), "lstm": (lstm, script_lstm)}


def assert_same_outputs(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_ort_script_runs_unchanged(name):
    build, script = SCRIPTS[name]
    model = build()
    want_meta, want = script(onnxruntime, model)
    got_meta, got = script(onnxjit, model)
    assert got_meta == want_meta
    assert_same_outputs(got, want)


def test_rank0_outputs_stay_rank0():
    graph = helper.make_graph(
        [helper.make_node("Add", ["step", "one"], ["next"]),
         helper.make_node("Relu", ["x"], ["y"])], "rank0",
        [helper.make_tensor_value_info("step", I64, []), helper.make_tensor_value_info("x", F, [3])],
        [helper.make_tensor_value_info("next", I64, []), helper.make_tensor_value_info("y", F, [3])],
        [numpy_helper.from_array(np.array(1, np.int64), "one")])
    model = _finish(graph)
    feed = {"step": np.array(4, np.int64), "x": np.ones(3, np.float32)}
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
    so = onnxjit.SessionOptions()
    so.enable_profiling = True         # a profiled build is a Python driver whatever the entry
    assert_same_outputs(onnxjit.InferenceSession(model, so).run(None, feed), want)


# -- feeds and errors as ORT takes them --------------------------------------------------------------
def _error(ort, model, feed, outputs=None):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    try:
        sess.run(outputs, feed)
    except Exception as exc:      # noqa: BLE001 - the message is what is compared
        return str(exc)
    return None


@pytest.mark.parametrize("feed,outputs", [
    ({"x": np.zeros((2, 4), np.float32)}, None),                                   # missing
    ({"x": np.zeros((2, 4), np.float32), "state": np.zeros((2, 4), np.float32),
      "step": np.array(0, np.int64), "bogus": np.zeros(1)}, None),                  # unknown
    ({"x": np.zeros((2, 4)), "state": np.zeros((2, 4), np.float32),
      "step": np.array(0, np.int64)}, None),                                        # dtype
    ({"x": np.zeros((2, 4, 1), np.float32), "state": np.zeros((2, 4), np.float32),
      "step": np.array(0, np.int64)}, None),                                        # rank
    ({"x": np.zeros((2, 5), np.float32), "state": np.zeros((2, 4), np.float32),
      "step": np.array(0, np.int64)}, None),                                        # dim
    ({"x": np.zeros((2, 4), np.float32), "state": np.zeros((2, 4), np.float32),
      "step": 3}, None),                                                            # a Python int
    ({"x": np.zeros((2, 4), np.float32), "state": np.zeros((2, 4), np.float32),
      "step": np.array(0, np.int64)}, ["y", "nope"]),                               # output name
], ids=["missing", "unknown", "dtype", "rank", "dim", "python-int", "output-name"])
def test_feed_errors_match_ort(feed, outputs):
    model = stateful()
    want = _error(onnxruntime, model, feed, outputs)
    assert want is not None
    assert _error(onnxjit, model, feed, outputs) == want


def test_lists_noncontiguous_and_ortvalues_are_fed_like_ort():
    model = mlp()
    x = np.asfortranarray(RNG_FEEDS["mlp"])
    for feed in ({"x": x}, {"x": x.tolist()}):
        want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed)
        got = onnxjit.InferenceSession(model).run(None, feed)
        assert_same_outputs(got, want)
    value = onnxjit.OrtValue.ortvalue_from_numpy(x)
    got = onnxjit.InferenceSession(model).run_with_ort_values(None, {"x": value})
    assert isinstance(got[0], onnxjit.OrtValue)
    np.testing.assert_allclose(got[0].numpy(), want[0], rtol=2e-5, atol=2e-5)


def test_model_loading_errors_match_ort(tmp_path):
    for source in (str(tmp_path / "missing.onnx"), b"not a model", bytearray(b"x")):
        errors = []
        for ort in (onnxruntime, onnxjit):
            with pytest.raises(Exception) as info:
                ort.InferenceSession(source, providers=["CPUExecutionProvider"])
            errors.append((type(info.value).__name__, str(info.value)))
        assert errors[0][0] == errors[1][0]
        if isinstance(source, bytearray):
            assert errors[0][1].replace("onnxruntime", "onnxjit") == errors[1][1]


def test_session_from_path(tmp_path):
    path = tmp_path / "lstm.onnx"
    path.write_bytes(lstm())
    (got_meta, got), (want_meta, want) = (script_lstm(ort, str(path)) for ort in (onnxjit, onnxruntime))
    assert got_meta == want_meta
    assert_same_outputs(got, want)


# -- options, providers, enums -------------------------------------------------------------------------
def _options_answers(ort):
    so = ort.SessionOptions()
    answers = [str(getattr(so, k)) for k in (
        "intra_op_num_threads", "inter_op_num_threads", "graph_optimization_level",
        "execution_mode", "execution_order", "enable_profiling", "profile_file_prefix",
        "optimized_model_filepath", "log_severity_level", "log_verbosity_level", "logid",
        "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse",
        "use_deterministic_compute")]
    so.add_session_config_entry("session.key", "3")
    with pytest.raises(TypeError):
        so.add_session_config_entry("session.key", 3)
    answers.append(so.get_session_config_entry("session.key"))
    with pytest.raises(RuntimeError) as info:
        so.get_session_config_entry("absent")
    answers.append(str(info.value))
    ro = ort.RunOptions()
    ro.add_run_config_entry("k", "v")
    answers += [ro.get_run_config_entry("k"), ro.log_severity_level, ro.logid, ro.terminate,
                ro.log_verbosity_level, ro.only_execute_path_to_fetches]
    for enum in (ort.GraphOptimizationLevel, ort.ExecutionMode, ort.ExecutionOrder):
        answers += [(str(m), repr(m), int(m)) for m in enum.__members__.values()]
    answers += [ort.get_device(), ort.get_available_providers()[-1]]
    return answers


def test_options_enums_and_providers_match_ort():
    assert _options_answers(onnxjit) == _options_answers(onnxruntime)


def test_terminate_fails_the_run_like_ort():
    model, feed = mlp(), {"x": RNG_FEEDS["mlp"]}
    messages = []
    for ort in (onnxruntime, onnxjit):
        ro = ort.RunOptions()
        ro.terminate = True
        with pytest.raises(Exception) as info:
            ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feed, ro)
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_cuda_provider_falls_back_to_cpu_with_a_warning():
    model = mlp()
    want_cuda = backend.supports_device("CUDA")
    for ort in (onnxruntime, onnxjit):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sess = ort.InferenceSession(model, providers=["CUDAExecutionProvider",
                                                          "CPUExecutionProvider"])
        has_cuda = "CUDAExecutionProvider" in ort.get_available_providers()
        if ort is onnxjit:
            assert has_cuda == want_cuda
        expected = ["CUDAExecutionProvider"] * has_cuda + ["CPUExecutionProvider"]
        assert sess.get_providers() == expected
        assert any("CUDAExecutionProvider" in str(w.message) for w in caught) != has_cuda
        assert_same_outputs(*[s.run(None, {"x": RNG_FEEDS["mlp"]}) for s in (
            sess, onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]))])
        sess.set_providers(["CPUExecutionProvider"])
        assert sess.get_providers() == ["CPUExecutionProvider"]
        assert sess.run(None, {"x": RNG_FEEDS["mlp"]})[0].shape == (5, 4)


CUDA_SCRIPT = r"""
import json, sys
import numpy as np, onnxjit as ort
x = np.load(sys.argv[2])
sess = ort.InferenceSession(open(sys.argv[1], "rb").read(), providers=["CUDAExecutionProvider"])
io = sess.io_binding()
io.bind_ortvalue_input("x", ort.OrtValue.ortvalue_from_numpy(x, "cuda", 0))
io.bind_output("y", "cuda")
sess.run_with_iobinding(io)
print(json.dumps({"providers": sess.get_providers(), "device": ort.get_device(),
                  "rep": type(sess.rep).__module__, "on": io.get_outputs()[0].device_name(),
                  "bound": io.copy_outputs_to_cpu()[0].tolist(),
                  "run": sess.run(None, {"x": x})[0].tolist()}))
"""


def test_cuda_provider_runs_the_cuda_target(tmp_path):
    """On Numba's CUDA simulator (no GPU here), CUDAExecutionProvider is onnxjit's CUDA target,
    and values bound on the device stay there."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["t"]), helper.make_node("Relu", ["t"], ["y"])], "sq",
        [helper.make_tensor_value_info("x", F, ["n", 3])],
        [helper.make_tensor_value_info("y", F, ["n", 3])])
    model, x = _finish(graph), RNG.standard_normal((2, 3)).astype(np.float32)
    (tmp_path / "m.onnx").write_bytes(model)
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", ONNXJIT_TIERED="0")
    out = subprocess.run([sys.executable, "-c", CUDA_SCRIPT, str(tmp_path / "m.onnx"),
                          str(tmp_path / "x.npy")], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    want = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    assert got["providers"] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert (got["device"], got["rep"], got["on"]) == ("GPU", "onnxjit.cuda.rep", "cuda")
    for key in ("bound", "run"):
        np.testing.assert_allclose(np.array(got[key], np.float32), want, rtol=1e-6, atol=1e-6)


def test_free_dimension_override_matches_ort():
    model = lstm()
    answers = []
    for ort in (onnxruntime, onnxjit):
        so = ort.SessionOptions()
        so.add_free_dimension_override_by_name("batch", 2)
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        h = np.zeros((1, 2, 8), np.float32)
        answers.append((metadata(sess),
                        _message(lambda: sess.run(None, {"X": np.zeros((5, 3, 3), np.float32),
                                                         "initial_h": h, "initial_c": h}))))
    assert "Expected: 2" in answers[0][1]
    assert answers[0] == answers[1]


def _message(call):
    try:
        call()
    except Exception as exc:      # noqa: BLE001
        return str(exc)
    return None


def test_intra_op_num_threads_is_honoured_per_call(monkeypatch):
    so = onnxjit.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxjit.InferenceSession(mlp(), so)
    seen, rep = [], sess.rep
    real_run = rep.run
    monkeypatch.setattr(rep, "run", lambda feeds: seen.append(numba.get_num_threads()) or
                        real_run(feeds))
    before = numba.config.NUMBA_NUM_THREADS
    numba.set_num_threads(before)
    sess.run(None, {"x": RNG_FEEDS["mlp"]})
    assert seen == [1] and numba.get_num_threads() == before
    so.intra_op_num_threads = 0           # the session copied its options, as ORT does
    sess.run(None, {"x": RNG_FEEDS["mlp"]})
    assert seen == [1, 1]


def test_one_session_from_four_threads():
    model = transformer()
    ids = [RNG.integers(0, 24, (1 + t % 2, 3 + t)).astype(np.int64) for t in range(4)]
    feeds = [{"input_ids": i, "position_ids": np.tile(np.arange(i.shape[1]), (i.shape[0], 1))}
             for i in ids]
    ref = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    want = [ref.run(None, f) for f in feeds]
    sess = onnxjit.InferenceSession(model)
    got, errors, start = [None] * 4, [], threading.Barrier(4)

    def work(t):
        try:
            start.wait()
            for _ in range(20):
                got[t] = sess.run(None, feeds[t])
        except Exception as exc:      # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors and not any(th.is_alive() for th in threads)
    for g, w in zip(got, want):
        assert_same_outputs(g, w)


def test_run_async_calls_back_on_another_thread():
    model, feed = stateful(), {"x": RNG_FEEDS["steps"][0], "state": RNG_FEEDS["steps"][1],
                               "step": np.array(2, np.int64)}
    bad = {**feed, "step": np.array(2.0)}
    answers = []
    for ort in (onnxruntime, onnxjit):
        sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        done, calls = threading.Event(), []

        def callback(results, user_data, err):
            calls.append((results, user_data, err, threading.current_thread()))
            done.set()
        for f in (feed, bad):
            done.clear()
            assert sess.run_async(None, f, callback, {"tag": 1}) is None
            assert done.wait(60)
        answers.append(calls)
    (ok, failed), (ok2, failed2) = answers
    assert_same_outputs(ok2[0], ok[0])
    assert ok2[1] == {"tag": 1} and ok2[2] == "" and ok2[3] is not threading.current_thread()
    assert failed2[0] == [] and failed[2] in failed2[2]


# -- OrtValue and IOBinding ----------------------------------------------------------------------------
def _ortvalue_answers(ort):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = ort.OrtValue.ortvalue_from_numpy(x)
    blank = ort.OrtValue.ortvalue_from_shape_and_type([3, 2], np.int64)
    typed = ort.OrtValue.ortvalue_from_shape_and_type([4], TensorProto.DOUBLE)
    answers = [v.shape(), v.data_type(), v.device_name(), v.is_tensor(), v.element_type(),
               v.has_value(), v.tensor_size_in_bytes(), v.data_ptr() == x.ctypes.data,
               np.shares_memory(v.numpy(), x), np.asarray(v).tolist(),
               blank.shape(), blank.data_type(), blank.numpy().dtype, typed.data_type()]
    v.update_inplace(x + 1)
    answers.append(x.tolist())
    with pytest.raises(Exception) as info:
        ort.OrtValue.ortvalue_from_numpy(x, "nosuchdevice", 0)
    answers.append(str(info.value))
    return answers


def test_ortvalue_round_trip_matches_ort():
    assert _ortvalue_answers(onnxjit) == _ortvalue_answers(onnxruntime)


def _iobinding_answers(ort, model):
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    x, state = RNG_FEEDS["steps"][:2]
    step = np.array(4, np.int64)
    io = sess.io_binding()
    io.bind_cpu_input("x", x)
    io.bind_ortvalue_input("state", ort.OrtValue.ortvalue_from_numpy(state))
    io.bind_input("step", "cpu", 0, np.int64, [], step.ctypes.data)
    io.bind_output("y")
    preset = ort.OrtValue.ortvalue_from_shape_and_type([2, 4], np.float32)
    io.bind_ortvalue_output("next_state", preset)
    buffer = np.zeros(1, np.int64)
    io.bind_output("next_step", "cpu", 0, np.int64, [1], buffer.ctypes.data)
    io.synchronize_inputs()
    sess.run_with_iobinding(io)
    io.synchronize_outputs()
    outs = io.get_outputs()
    answers = [[o.shape() for o in outs], io.copy_outputs_to_cpu(), preset.numpy().copy(),
               outs[1].data_ptr() == preset.data_ptr(), buffer.tolist()]
    io.clear_binding_outputs()
    answers.append(_message(lambda: sess.run_with_iobinding(io)))
    io.bind_output("y")
    io.clear_binding_inputs()
    answers.append(_message(lambda: sess.run_with_iobinding(io)) is not None)
    return answers


def test_iobinding_round_trip_matches_ort():
    model = stateful()
    got, want = _iobinding_answers(onnxjit, model), _iobinding_answers(onnxruntime, model)
    assert got[0] == want[0]
    assert_same_outputs(got[1], want[1])
    np.testing.assert_allclose(got[2], want[2], rtol=2e-5, atol=2e-5)
    assert got[3:] == want[3:]


# -- profiling and optimized-model output -------------------------------------------------------------
def test_end_profiling_writes_a_chrome_trace(tmp_path):
    paths, traces = [], []
    for ort in (onnxruntime, onnxjit):
        so = ort.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / ort.__name__)
        sess = ort.InferenceSession(mlp(), so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            sess.run(None, {"x": RNG_FEEDS["mlp"]})
        paths.append(sess.end_profiling())
        assert sess.end_profiling() == ""
        with open(paths[-1]) as f:
            traces.append(json.load(f))
    for path in paths:
        assert os.path.basename(path).startswith(("onnxruntime_", "onnxjit_")) and path.endswith(".json")
    keys = {"cat", "pid", "tid", "dur", "ts", "ph", "name", "args"}
    for trace in traces:
        assert isinstance(trace, list) and all(keys <= set(e) and e["ph"] == "X" for e in trace)
    runs = [e for e in traces[1] if e["name"] == "model_run"]
    assert len(runs) == 3 == len([e for e in traces[0] if e["name"] == "model_run"])
    profile = sess.rep.compiled().profile          # {kernel: [seconds, calls]}
    kernel_events = [e for e in traces[1] if e["cat"] == "Node"]
    assert profile and len(kernel_events) == sum(calls for _, calls in profile.values())
    assert {e["name"] for e in kernel_events} == set(profile)
    for run in runs:      # each run's kernel events lie inside it
        inside = [e for e in kernel_events if run["ts"] <= e["ts"] <= run["ts"] + run["dur"] + 1]
        assert len(inside) == len(profile)


def test_optimized_model_filepath_writes_the_model_and_its_source(tmp_path):
    so = onnxjit.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    sess = onnxjit.InferenceSession(transformer(), so)
    feed = {"input_ids": RNG_FEEDS["ids"],
            "position_ids": np.tile(np.arange(6, dtype=np.int64), (2, 1))}
    got = sess.run(None, feed)
    written = onnx.load(so.optimized_model_filepath)
    written.ir_version = 10
    want = onnxruntime.InferenceSession(written.SerializeToString(),
                                        providers=["CPUExecutionProvider"]).run(None, feed)
    assert_same_outputs(got, want)
    source = (tmp_path / "opt.py").read_text()
    assert sess.rep.source() in source


# -- the backend API's additions -----------------------------------------------------------------------
def test_is_opset_supported_names_unknown_domains_and_versions():
    newest = onnx.defs.onnx_opset_version()
    model = onnx.ModelProto.FromString(mlp())
    assert backend.is_opset_supported(model) == (True, "")
    assert backend.OnnxJitBackend.is_opset_supported(model) == (True, "")
    model.opset_import.append(helper.make_opsetid("com.example.custom", 2))
    model.opset_import[0].version = newest + 1
    ok, reason = backend.is_opset_supported(model)
    assert not ok and "com.example.custom" in reason and f"opset {newest + 1}" in reason


def test_rep_pickles_as_model_and_options_and_compiles_on_first_run():
    model = onnx.ModelProto.FromString(mlp())
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 5    # static: compiled now
    rep = backend.prepare(model, "CPU", max_signatures=5, tiered=False)
    assert rep.cache_info()["signatures"] == 1
    x = RNG_FEEDS["mlp"]
    want = rep.run([x])
    copy = pickle.loads(pickle.dumps(rep))
    assert isinstance(copy, backend.OnnxJitRep) and copy.cache_info()["signatures"] == 0
    assert (copy.max_signatures, copy.tiered, copy.device) == (5, False, "CPU")
    got = copy.run([x])
    assert_same_outputs(list(got), list(want))
    assert copy.cache_info()["signatures"] == 1


def test_session_pickles_and_rebuilds_lazily():
    so = onnxjit.SessionOptions()
    so.intra_op_num_threads = 1
    so.add_session_config_entry("onnxjit.max_signatures", "3")
    sess = onnxjit.InferenceSession(lstm(), so)
    copy = pickle.loads(pickle.dumps(sess))
    assert copy._rep is None                  # nothing compiled until the first run
    assert metadata(copy) == metadata(sess)
    assert copy.get_session_options().intra_op_num_threads == 1
    x = RNG_FEEDS["seq"]
    h = np.zeros((1, 2, 8), np.float32)
    feed = {"X": x, "initial_h": h, "initial_c": h}
    want = onnxruntime.InferenceSession(lstm(), providers=["CPUExecutionProvider"]).run(None, feed)
    assert_same_outputs(copy.run(None, feed), want)
    assert copy.rep.max_signatures == 3


# -- graph_optimization_level -----------------------------------------------------------------------
def _conv_bn_relu():
    bn = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in zip(
        ["s", "b", "m", "v"], [RNG.standard_normal(4), RNG.standard_normal(4),
                               RNG.standard_normal(4), RNG.random(4) + 0.5])]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"]),
         helper.make_node("Relu", ["n"], ["r"]),
         helper.make_node("Sigmoid", ["r"], ["y"])], "cbr",
        [helper.make_tensor_value_info("x", F, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("y", F, [1, 4, 6, 6])], [_w("w", 4, 3, 3, 3)] + bn)
    return _finish(graph)


@pytest.mark.parametrize("level,ops_in_kernels", [
    ("ORT_DISABLE_ALL", [["Conv"], ["BatchNormalization"], ["Relu"], ["Sigmoid"]]),
    ("ORT_ENABLE_BASIC", [["Conv"], ["BatchNormalization", "Relu", "Sigmoid"]]),
    ("ORT_ENABLE_ALL", [["Conv", "BatchNormalization", "Relu"], ["Sigmoid"]])])
def test_graph_optimization_level_sets_fusion_and_peepholes(level, ops_in_kernels):
    """Disabled: a kernel per node; basic: elementwise fusion only; all: BatchNormalization and
    Relu folded into the Conv too. Each matches ONNX Runtime at the same level."""
    model = _conv_bn_relu()
    feed = {"x": RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)}
    answers = []
    for ort in (onnxruntime, onnxjit):
        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        answers.append(sess.run(None, feed))
    np.testing.assert_allclose(answers[1][0], answers[0][0], rtol=1e-5, atol=1e-6)
    kernels = [k for k in sess.rep.compiled().kernels if not k.plumbing]   # Conv's 5-D views
    assert [[op for _, op in k.nodes] for k in kernels] == ops_in_kernels
