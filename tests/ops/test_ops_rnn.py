"""RNN/GRU/LSTM, Attention, RotaryEmbedding, SwiGLU and the losses against an oracle.

The oracle is onnx's ReferenceEvaluator; where it ignores an attribute (activations, clip,
sequence_lens, input_forget) it is ONNX Runtime.
"""
import numpy as np
import onnxruntime
import pytest
from onnx import helper, numpy_helper
from onnx.helper import np_dtype_to_tensor_dtype
from onnx.reference import ReferenceEvaluator

import onnxjit.backend

F32, F64 = np.float32, np.float64


def _model(op, inputs, outputs=("y0",), opset=21, consts=None, **attrs):
    """A one-node model; an input or output name "" stands for one left out."""
    consts = consts or {}
    names = [k if v is not None else "" for k, v in inputs.items()] + list(consts)
    while names and not names[-1]:     # trailing optional inputs left out are not listed
        names.pop()
    node = helper.make_node(op, names, list(outputs), **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items() if v is not None],
        [helper.make_empty_tensor_value_info(o) for o in outputs if o],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _feeds(inputs):
    return {k: v for k, v in inputs.items() if v is not None}


def _check(model, feeds, oracle="reference", tol=None):
    """Run through onnxjit and compare every output with the oracle's."""
    if oracle == "ort":
        model.ir_version = 10   # the installed ORT reads IR versions up to 13
        sess = onnxruntime.InferenceSession(model.SerializeToString(),
                                            providers=["CPUExecutionProvider"])
        expected = sess.run(None, feeds)
    else:
        expected = ReferenceEvaluator(model).run(None, feeds)
    got = onnxjit.backend.prepare(model).run(feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, e.shape, g.dtype, e.dtype)
        t = tol or (1e-5 if e.dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(g, e, rtol=t, atol=t)


def _rand(shape, dtype=F32, seed=0, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


# ---- RNN / GRU / LSTM ------------------------------------------------------------------------
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _rnn_inputs(op, direction, layout, full, dtype, seq=4, batch=3, ni=5, hs=4, lens=None):
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x_shape = (batch, seq, ni) if layout else (seq, batch, ni)
    s_shape = (batch, nd, hs) if layout else (nd, batch, hs)
    inputs = {"X": _rand(x_shape, dtype, 1), "W": _rand((nd, g * hs, ni), dtype, 2, 0.5),
              "R": _rand((nd, g * hs, hs), dtype, 3, 0.5),
              "B": _rand((nd, 2 * g * hs), dtype, 4) if full else None,
              "sequence_lens": lens, "initial_h": _rand(s_shape, dtype, 5) if full else None}
    if op == "LSTM":
        inputs["initial_c"] = _rand(s_shape, dtype, 6) if full else None
        inputs["P"] = _rand((nd, 3 * hs), dtype, 7) if full else None
    return inputs, hs


def _rnn_outputs(op):
    return ("Y", "Y_h", "Y_c") if op == "LSTM" else ("Y", "Y_h")


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("full", [False, True])
def test_recurrent(op, direction, layout, full):
    inputs, hs = _rnn_inputs(op, direction, layout, full, F32)
    model = _model(op, inputs, _rnn_outputs(op), hidden_size=hs, direction=direction,
                   layout=layout)
    _check(model, _feeds(inputs))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_float64_and_partial_outputs(op):
    inputs, hs = _rnn_inputs(op, "bidirectional", 0, True, F64)
    outs = ("", "Y_h", "") if op == "LSTM" else ("", "Y_h")
    _check(_model(op, inputs, outs, hidden_size=hs, direction="bidirectional"), _feeds(inputs))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gru_linear_before_reset(direction):
    inputs, hs = _rnn_inputs("GRU", direction, 0, True, F32)
    model = _model("GRU", inputs, ("Y", "Y_h"), hidden_size=hs, direction=direction,
                   linear_before_reset=1)
    _check(model, _feeds(inputs))


ORT_CASES = [  # (op, direction, attributes, with sequence_lens)
    ("RNN", "forward", dict(activations=["Relu"]), False),
    ("RNN", "bidirectional", dict(activations=["LeakyRelu", "Affine"],
                                  activation_alpha=[0.2, 0.7], activation_beta=[0.3]), False),
    ("RNN", "reverse", dict(clip=0.5), True),
    ("RNN", "bidirectional", {}, True),
    ("GRU", "forward", dict(activations=["HardSigmoid", "Softsign"], activation_alpha=[0.3],
                            activation_beta=[0.4]), False),
    ("GRU", "bidirectional", dict(clip=0.7, linear_before_reset=1), True),
    ("GRU", "reverse", dict(activations=["Sigmoid", "Elu"], activation_alpha=[0.5]), True),
    ("LSTM", "forward", dict(activations=["Sigmoid", "ScaledTanh", "Softplus"],
                             activation_alpha=[0.8], activation_beta=[1.2]), False),
    ("LSTM", "bidirectional", dict(clip=0.6), True),
    ("LSTM", "reverse", dict(input_forget=1), True),
    ("LSTM", "forward", dict(activations=["Sigmoid", "Tanh", "ThresholdedRelu"],
                             activation_alpha=[0.1]), False),
]


@pytest.mark.parametrize("op,direction,attrs,with_lens", ORT_CASES)
def test_recurrent_against_ort(op, direction, attrs, with_lens):
    lens = np.array([4, 2, 3], np.int32) if with_lens else None
    inputs, hs = _rnn_inputs(op, direction, 0, True, F32, lens=lens)
    model = _model(op, inputs, _rnn_outputs(op), hidden_size=hs, direction=direction, **attrs)
    _check(model, _feeds(inputs), oracle="ort")


def _const_weight_model(op, inputs, outputs, **attrs):
    """One node whose W, R (and B) are initializers, as exporters write them: the float32
    fast kernels (packed weights, fused gates: kernels/rnn.py) take those."""
    consts = {k: inputs[k] for k in ("W", "R", "B") if inputs.get(k) is not None}
    names = [k if v is not None else "" for k, v in inputs.items()]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, list(outputs), **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items() if v is not None and k not in consts],
        [helper.make_empty_tensor_value_info(o) for o in outputs if o],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


FAST_CASES = [  # (op, direction, layout, hidden, batch, with lens, attrs)
    ("LSTM", "forward", 0, 4, 1, False, {}),
    ("LSTM", "reverse", 0, 20, 3, True, {}),
    ("LSTM", "bidirectional", 1, 40, 2, False, {}),
    ("LSTM", "forward", 0, 32, 4, False, {}),
    ("LSTM", "bidirectional", 0, 20, 5, True, {}),          # batch 5: the generic kernel
    ("GRU", "forward", 0, 4, 1, False, {}),
    ("GRU", "forward", 0, 40, 1, False, dict(linear_before_reset=1)),
    ("GRU", "reverse", 1, 20, 3, False, dict(linear_before_reset=1)),
    ("GRU", "reverse", 0, 20, 3, True, dict(linear_before_reset=1)),
    ("GRU", "bidirectional", 0, 40, 2, True, {}),
    ("GRU", "bidirectional", 0, 32, 4, False, dict(linear_before_reset=1)),
]


@pytest.mark.parametrize("op,direction,layout,hs,batch,with_lens,attrs", FAST_CASES)
def test_recurrent_constant_weights_fast_path(op, direction, layout, hs, batch, with_lens,
                                              attrs):
    """Constant W/R, default activations, no clip, batch <= 4: the packed-weight kernels
    (lstm_fast / gru_fast), checked against onnxruntime (layout 1, which it refuses: the
    reference evaluator, which ignores sequence_lens); hidden sizes off and on multiples of 16
    and over a 128-column GEMV chunk, sequence_lens."""
    seq = 6
    lens = (np.arange(batch, dtype=np.int32) % seq + 1)[::-1].copy() if with_lens else None
    inputs, _ = _rnn_inputs(op, direction, layout, True, F32, seq=seq, batch=batch, ni=7,
                            hs=hs, lens=lens)
    model = _const_weight_model(op, inputs, _rnn_outputs(op), hidden_size=hs,
                                direction=direction, layout=layout, **attrs)
    feeds = {k: v for k, v in _feeds(inputs).items() if k not in ("W", "R", "B")}
    _check(model, feeds, oracle="reference" if layout else "ort")
    from onnxjit.kernels.rnn import FAST_MAX_BATCH
    from onnxjit.target import host
    source = onnxjit.backend.prepare(model).source()
    seq_kernel = batch == 1 and (op == "LSTM" or attrs.get("linear_before_reset"))
    fast = f"{op.lower()}_seq" if seq_kernel else f"{op.lower()}_fast"
    assert (fast in source) == (batch <= FAST_MAX_BATCH and host().split16), source


SEQ_CASES = [  # (op, direction, layout, hidden, input size, seq, sequence_lens, full, attrs)
    ("LSTM", "forward", 0, 128, 64, 37, None, True, {}),
    ("LSTM", "reverse", 0, 20, 7, 21, [13], True, {}),
    ("LSTM", "bidirectional", 0, 33, 50, 17, [17], True, {}),
    ("LSTM", "bidirectional", 1, 40, 150, 9, None, False, {}),
    ("LSTM", "forward", 0, 130, 16, 8, [0], True, {}),
    ("LSTM", "reverse", 0, 16, 3, 1, None, True, {}),
    ("GRU", "forward", 0, 128, 64, 37, None, True, dict(linear_before_reset=1)),
    ("GRU", "reverse", 0, 20, 7, 21, [13], True, dict(linear_before_reset=1)),
    ("GRU", "bidirectional", 1, 33, 50, 17, None, True, dict(linear_before_reset=1)),
    ("GRU", "forward", 0, 100, 130, 11, [9], False, dict(linear_before_reset=1)),
    ("GRU", "reverse", 0, 36, 9, 5, [0], True, dict(linear_before_reset=1)),
    ("GRU", "bidirectional", 0, 24, 5, 19, [19], True, {}),     # lbr=0: gru_fast
]


@pytest.mark.parametrize("op,direction,layout,hs,ni,seq,lens,full,attrs", SEQ_CASES)
def test_recurrent_batch1_sequence_kernel(op, direction, layout, hs, ni, seq, lens, full, attrs):
    """Batch 1, constant W/R, default activations, no clip: lstm_seq / gru_seq
    (kernels/rnn_seq.py: gate-interleaved GEMV with the input projection computed in 8-row
    blocks one block ahead), against onnxruntime (layout 1: the reference evaluator). Hidden
    sizes on and off multiples of 16 and over a chunk, input sizes below and above the hidden
    size, sequences shorter than, equal to and over one 8-row block, sequence_lens (0 too),
    initial states and peepholes (full) or none."""
    lens = np.array(lens, np.int32) if lens is not None else None
    inputs, _ = _rnn_inputs(op, direction, layout, full, F32, seq=seq, batch=1, ni=ni, hs=hs,
                            lens=lens)
    for k in ("W", "R"):
        inputs[k] *= np.float32(2.0 / np.sqrt(hs))     # keep 37 steps away from saturation
    model = _const_weight_model(op, inputs, _rnn_outputs(op), hidden_size=hs,
                                direction=direction, layout=layout, **attrs)
    feeds = {k: v for k, v in _feeds(inputs).items() if k not in ("W", "R", "B")}
    _check(model, feeds, oracle="reference" if layout else "ort")
    from onnxjit.target import host
    source = onnxjit.backend.prepare(model).source()
    want = "_seq" if op == "LSTM" or attrs.get("linear_before_reset") else "_fast"
    assert (f"{op.lower()}{want}" in source) == host().split16, source


def _seq_args(op, seq, ni, hs, nd, rev, n, seed):
    """lstm_seq's or gru_seq's arguments (random, scaled to stay off saturation)."""
    from onnxjit.kernels import rnn_seq as KS
    gates = {"LSTM": 4, "GRU": 3}[op]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((seq, 1, ni), dtype=F32)
    w, r = (rng.standard_normal((nd, gates * hs, k), dtype=F32) * F32(1.5 / np.sqrt(hs))
            for k in (ni, hs))
    b = rng.standard_normal((nd, 2 * gates * hs), dtype=F32) * F32(0.1)
    h0 = rng.standard_normal((nd, 1, hs), dtype=F32)
    lens = np.array([seq if n is None else n], np.int32)
    wp, rp = KS.pack_w(w, gates), KS.pack_r(r, gates)
    if op == "GRU":
        return (x, wp, rp, b, h0, lens, rev)
    c0 = rng.standard_normal((nd, 1, hs), dtype=F32)
    p = rng.standard_normal((nd, 3 * hs), dtype=F32) * F32(0.1)
    return (x, wp, rp, b, h0, c0, p, lens, rev)


TWO_THREAD_CASES = [  # (op, seq, input size, hidden, directions, reverse, sequence_lens)
    ("LSTM", 100, 64, 128, 1, False, None),    # the built-in suite's layer
    ("LSTM", 37, 128, 128, 2, False, None),    # bidirectional: a region per direction
    ("LSTM", 40, 160, 64, 1, True, 33),        # reverse, sequence_lens, input wider than hidden
    ("LSTM", 16, 8, 192, 1, False, None),      # PAR_MIN_STEPS, 3 chunks a thread
    ("LSTM", 15, 8, 128, 1, False, None),      # one step short: one thread
    ("LSTM", 24, 8, 96, 1, False, None),       # hidden not a multiple of 64: one thread
    ("GRU", 100, 64, 128, 1, False, None),     # the built-in layer: a chunk across the halves
    ("GRU", 37, 128, 256, 2, False, None),     # bidirectional, whole chunks each half
    ("GRU", 40, 160, 128, 1, True, 33),        # reverse, sequence_lens, input wider than hidden
    ("GRU", 16, 8, 384, 1, False, None),       # PAR_MIN_STEPS, 4.5 chunks a half
    ("GRU", 20, 8, 64, 1, False, None),        # hidden not a multiple of 128: one thread
]


@pytest.mark.parametrize("op,seq,ni,hs,nd,rev,n", TWO_THREAD_CASES)
def test_recurrence_two_threads_equal_one(op, seq, ni, hs, nd, rev, n):
    """lstm_seq's and gru_seq's two-thread paths (each step's GEMV chunks and gates split
    between two threads that claim the halves and wait for both; GRU's chunk across the middle
    as two 4-vector halves, its input-projection tile by step parity) give the one-thread
    path's outputs bit for bit: each element is computed by the same operations in the same
    order."""
    import numba
    from onnxjit.kernels import rnn_seq as KS
    fn = KS.lstm_seq if op == "LSTM" else KS.gru_seq
    args = _seq_args(op, seq, ni, hs, nd, rev, n, seed=seq + hs)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = fn(*args)        # first: its scratch is not the one-thread call's, reused
        numba.set_num_threads(1)
        one = fn(*args)
    finally:
        numba.set_num_threads(old)
    for a, b in zip(one, two):
        assert a.shape == b.shape and np.array_equal(a, b)


def test_two_thread_recurrences_from_several_python_threads():
    """Six Python threads run the two-thread LSTM and GRU at once (regions competing for the
    pool's workers, a region's chunks run one after the other when the workers are busy):
    every call finishes and equals the one-thread result."""
    import threading
    import numba
    from onnxjit.kernels import rnn_seq as KS
    calls = [(KS.lstm_seq, _seq_args("LSTM", 40, 32, 128, 1, False, None, seed=3)),
             (KS.gru_seq, _seq_args("GRU", 40, 32, 128, 1, False, None, seed=4))]
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    want = [fn(*args) for fn, args in calls]
    numba.set_num_threads(old)
    bad = []

    def work(t):
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        for i in range(10):
            k = (t + i) % 2
            got = calls[k][0](*calls[k][1])
            if not all(np.array_equal(a, b) for a, b in zip(got, want[k])):
                bad.append((t, i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a recurrence did not finish"
    assert not bad, bad


@pytest.mark.parametrize("first", [0, 1])
def test_lstm_two_thread_walk_alone(first):
    """A thread of the two-thread walk whose partner never runs beside it (the pool ran the
    region's two chunks one after the other) does every part itself and does not wait; the
    partner then finds every step done. Run here one walk after the other on one thread."""
    from numba import njit
    from onnxjit.kernels import rnn_seq as KS

    @njit
    def walk_in_turn(x, wp, rp, b, h0, c0, p, n, first):
        ni, hs = x.shape[2], h0.shape[2]
        nv, G = hs // 4, hs * 4
        xf = np.ascontiguousarray(x).ravel()
        y = np.zeros((x.shape[0], 1, 1, hs), np.float32)
        xw, g, xo = np.empty(2 * KS.SB * G, np.float32), np.empty(G, np.float32), \
            np.zeros(KS.SB, np.int64)
        pp = np.ascontiguousarray(p[0])
        cf = np.ascontiguousarray(c0[0, 0])
        hbuf = np.zeros(2 * hs, np.float32)
        hbuf[:hs] = h0[0, 0]
        wpd, rpd = wp[0], rp[0]
        bv = KS._interleaved_bias(b, 0, hs, hs, 4, 4)
        KS._first_block(xf, xo, n, ni, False, wpd, bv, xw, nv)
        sync = np.zeros(KS.SYNC * n, np.int64)
        for t in (first, 1 - first):
            KS._lstm_steps_2t(t, n, hs, nv, rpd, xw, g, xf, ni, wpd, bv, pp, cf, hbuf,
                              y.ravel(), 0, 1, False, sync)
        return y, hbuf[(n % 2) * hs:(n % 2) * hs + hs], cf, sync

    args = _seq_args("LSTM", 20, 24, 64, 1, False, None, seed=7)
    x, wp, rp, b, h0, c0, p, lens, rev = args
    want = KS.lstm_seq(*args)
    y, h, c, sync = walk_in_turn(x, wp, rp, b, h0, c0, p, 20, first)
    assert np.array_equal(y, want[0]) and np.array_equal(h, want[1][0, 0])
    assert np.array_equal(c, want[2][0, 0])
    steps = sync.reshape(20, KS.SYNC)
    assert (steps[:, :2] == 1).all() and (steps[:, 2] == 2).all() and (steps[:, 3:] == 0).all()


@pytest.mark.parametrize("attrs", [dict(clip=0.8), dict(activations=["Sigmoid", "Tanh", "Relu"]),
                                   dict(input_forget=1)])
def test_lstm_batch1_non_default_falls_back(attrs):
    """clip, other activations or input_forget at batch 1 take the generic kernel."""
    inputs, hs = _rnn_inputs("LSTM", "forward", 0, True, F32, seq=19, batch=1, ni=6, hs=20)
    model = _const_weight_model("LSTM", inputs, _rnn_outputs("LSTM"), hidden_size=hs, **attrs)
    feeds = {k: v for k, v in _feeds(inputs).items() if k not in ("W", "R", "B")}
    _check(model, feeds, oracle="ort")
    source = onnxjit.backend.prepare(model).source()
    assert "lstm_seq" not in source and "__k_rnn.lstm(" in source, source


def test_sequence_lens_out_of_range_raises():
    inputs, hs = _rnn_inputs("RNN", "forward", 0, True, F32, lens=np.array([5, 2, 3], np.int32))
    rep = onnxjit.backend.prepare(_model("RNN", inputs, ("Y",), hidden_size=hs))
    with pytest.raises(IndexError, match="sequence_lens"):
        rep.run(_feeds(inputs))


# ---- Attention -------------------------------------------------------------------------------
def _attn(q, k, v, *, mask=None, past=0, nonpad=None, heads=None, dv=None, seed=0, dtype=F32,
          mask_dtype=None):
    """Inputs of an Attention node: q/k/v are (batch, heads, seq, d) shapes (3-D if heads)."""
    dv = dv or k[-1]
    inputs = {}
    if heads:
        inputs["Q"] = _rand((q[0], q[2], q[1] * q[3]), dtype, seed)
        inputs["K"] = _rand((k[0], k[2], k[1] * k[3]), dtype, seed + 1)
        inputs["V"] = _rand((k[0], k[2], k[1] * dv), dtype, seed + 2)
    else:
        inputs["Q"], inputs["K"] = _rand(q, dtype, seed), _rand(k, dtype, seed + 1)
        inputs["V"] = _rand(k[:3] + (dv,), dtype, seed + 2)
    if mask is not None:
        m = np.random.default_rng(seed + 3)
        inputs["attn_mask"] = (m.random(mask) > 0.3 if mask_dtype == bool
                               else m.standard_normal(mask).astype(dtype))
    else:
        inputs["attn_mask"] = None
    inputs["past_key"] = _rand((k[0], k[1], past, k[3]), dtype, seed + 4) if past else None
    inputs["past_value"] = _rand((k[0], k[1], past, dv), dtype, seed + 5) if past else None
    inputs["nonpad_kv_seqlen"] = nonpad
    return inputs


Q4, K4 = (2, 3, 4, 8), (2, 3, 6, 8)
ATTN_CASES = [  # (id, input kwargs, attributes, outputs, opset)
    ("plain", {}, {}, ("Y",), 23),
    ("gqa", dict(q=(2, 6, 4, 8)), {}, ("Y",), 23),
    ("diff_v", dict(dv=5), dict(scale=0.3), ("Y",), 23),
    ("causal", {}, dict(is_causal=1), ("Y",), 23),
    ("mask2d", dict(mask=(4, 6)), {}, ("Y",), 23),
    ("mask4d_causal", dict(mask=(2, 3, 4, 6)), dict(is_causal=1), ("Y",), 23),
    ("bool_mask", dict(mask=(2, 1, 4, 6), mask_dtype=bool), {}, ("Y",), 23),
    ("bool_mask_causal", dict(mask=(4, 6), mask_dtype=bool), dict(is_causal=1), ("Y",), 24),
    ("softcap", {}, dict(softcap=2.0), ("Y",), 23),
    ("past", dict(past=5, mask=(4, 11)), {}, ("Y", "pk", "pv"), 23),
    ("past_causal", dict(past=3), dict(is_causal=1), ("Y", "pk", "pv"), 24),
    ("short_mask", dict(past=3, mask=(4, 6)), {}, ("Y", "pk", "pv"), 23),
    ("qk0", dict(mask=(4, 6)), dict(softcap=1.5), ("Y", "", "", "qk"), 23),
    ("qk1", dict(mask=(4, 6)), dict(qk_matmul_output_mode=1, softcap=1.5),
     ("Y", "", "", "qk"), 23),
    ("qk2", dict(mask=(4, 6)), dict(qk_matmul_output_mode=2), ("Y", "", "", "qk"), 23),
    ("qk3", dict(mask=(2, 1, 4, 6), past=2), dict(qk_matmul_output_mode=3),
     ("Y", "pk", "pv", "qk"), 23),
    ("3d", dict(heads=True), dict(q_num_heads=3, kv_num_heads=3), ("Y",), 23),
    ("3d_gqa_past", dict(q=(2, 6, 4, 8), heads=True, past=2, dv=4),
     dict(q_num_heads=6, kv_num_heads=3, is_causal=1), ("Y", "pk", "pv"), 23),
    ("nonpad", dict(nonpad=np.array([3, 6], np.int64)), dict(is_causal=1), ("Y",), 24),
    ("nonpad_mask", dict(nonpad=np.array([5, 2], np.int64), mask=(2, 1, 4, 6),
                         mask_dtype=bool), {}, ("Y",), 24),
    ("window", dict(mask=(4, 6)), dict(is_causal=1, left_window_size=1), ("Y",), 25),
    ("window_lr", {}, dict(left_window_size=1, right_window_size=2), ("Y",), 25),
    ("window_past", dict(past=4), dict(is_causal=1, left_window_size=2),
     ("Y", "pk", "pv"), 25),
]


@pytest.mark.parametrize("case", ATTN_CASES, ids=[c[0] for c in ATTN_CASES])
def test_attention(case):
    _, kwargs, attrs, outs, opset = case
    kwargs = dict(q=Q4, k=K4) | kwargs
    inputs = _attn(kwargs.pop("q"), kwargs.pop("k"), kwargs.pop("v", None), **kwargs)
    _check(_model("Attention", inputs, outs, opset=opset, **attrs), _feeds(inputs))


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_float64(causal):
    inputs = _attn(Q4, K4, None, mask=(4, 6), past=2, dtype=F64)
    model = _model("Attention", inputs, ("Y", "pk", "pv", "qk"), opset=23, is_causal=causal,
                   qk_matmul_output_mode=3)
    _check(model, _feeds(inputs))


def test_attention_fully_masked_row_is_zero():
    inputs = _attn((1, 2, 2, 8), (1, 2, 2, 8), None, mask=(2, 2), mask_dtype=bool)
    inputs["attn_mask"] = np.array([[True, False], [False, False]])
    model = _model("Attention", inputs, ("Y", "", "", "qk"), opset=23, qk_matmul_output_mode=3)
    got = onnxjit.backend.prepare(model).run(_feeds(inputs))
    assert not np.isnan(got[0]).any() and (got[0][:, :, 1] == 0).all()
    _check(model, _feeds(inputs))


# ---- RotaryEmbedding -------------------------------------------------------------------------
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rdim", [0, 4])
@pytest.mark.parametrize("form", ["4d_pos", "3d_pos", "4d_nopos"])
def test_rotary_embedding(interleaved, rdim, form):
    half = (rdim or 8) // 2
    x = _rand((2, 4, 3, 8)) if form != "3d_pos" else _rand((2, 3, 32))
    if form == "4d_nopos":
        inputs = {"X": x, "cos": _rand((2, 3, half), seed=1), "sin": _rand((2, 3, half), seed=2)}
    else:
        inputs = {"X": x, "cos": _rand((50, half), seed=1), "sin": _rand((50, half), seed=2),
                  "pos": np.random.default_rng(3).integers(0, 50, (2, 3))}
    attrs = dict(num_heads=4) if form == "3d_pos" else {}
    model = _model("RotaryEmbedding", inputs, opset=23, interleaved=interleaved,
                   rotary_embedding_dim=rdim, **attrs)
    _check(model, inputs)


def test_rotary_position_out_of_range_raises():
    inputs = {"X": _rand((1, 2, 3, 4)), "cos": _rand((5, 2)), "sin": _rand((5, 2)),
              "pos": np.array([[0, 1, 5]])}
    rep = onnxjit.backend.prepare(_model("RotaryEmbedding", inputs, opset=23))
    with pytest.raises(IndexError, match="position id"):
        rep.run(inputs)


# ---- SwiGLU ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_swiglu(dtype, alpha):
    inputs = {"A": _rand((3, 5), dtype, 1, 4.0), "B": _rand((3, 5), dtype, 2)}
    _check(_model("SwiGLU", inputs, opset=28, alpha=alpha), inputs)


# ---- losses ----------------------------------------------------------------------------------
LOSS_SHAPES = [(3, 5), (2, 4, 3, 2)]


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1])
@pytest.mark.parametrize("shape", LOSS_SHAPES, ids=["2d", "4d"])
def test_loss(op, reduction, weighted, ignore_index, shape):
    target = np.random.default_rng(1).integers(0, shape[1], shape[:1] + shape[2:])
    inputs = {"x": _rand(shape), "t": target,
              "w": _rand((shape[1],), seed=2) ** 2 if weighted else None}
    attrs = {} if ignore_index is None else dict(ignore_index=ignore_index)
    outs = ("loss", "log_prob") if op.startswith("Softmax") else ("loss",)
    _check(_model(op, inputs, outs, reduction=reduction, **attrs), _feeds(inputs))


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
def test_loss_float64(op):
    inputs = {"x": _rand((3, 4, 5), F64), "t": np.array([[0, 3, -1, 2, 1]] * 3),
              "w": _rand((4,), F64, 2) ** 2}
    _check(_model(op, inputs, reduction="mean", ignore_index=-1), inputs)


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"])
def test_loss_target_out_of_range_raises(op):
    inputs = {"x": _rand((3, 4)), "t": np.array([0, 4, 1])}
    rep = onnxjit.backend.prepare(_model(op, inputs, reduction="sum"))
    with pytest.raises(IndexError, match="target"):
        rep.run(inputs)
