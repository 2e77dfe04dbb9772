"""Staged specialization (onnxjit/staged.py): data-dependent shapes, sequences, optionals and
control flow decided at run time, against onnxruntime and onnx's reference evaluator."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from onnxjit import staged
from onnxjit.errors import KernelError
from onnxjit.staged import StagedRep

OPSET = [helper.make_opsetid("", 17)]


def ort_run(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ir_version = min(m.ir_version, 10)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ref_run(model, feeds):
    return ReferenceEvaluator(model).run(None, feeds)


def detector_tail(k_from_data=False, dynamic=False):
    """scores [N, C], boxes [N, 4] -> best class per candidate (ArgMax / ReduceMax), NonZero over
    a score threshold, Gather of the kept boxes, TopK (k = min(kept, 8), or the number of kept
    scores over a second threshold when `k_from_data`), NonMaxSuppression of the top boxes."""
    n = None if dynamic else 40
    i = lambda name, *v: numpy_helper.from_array(np.array(*v, dtype=np.int64), name)  # noqa: E731
    inits = [numpy_helper.from_array(np.array(0.3, np.float32), "thr"),
             numpy_helper.from_array(np.array(0.6, np.float32), "thr2"),
             i("eight", [8]), i("zero", [0]), i("one", [1]), i("axis0", [0]), i("max_out", [4]),
             numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array([0.0], np.float32), "score_thr")]
    nodes = [
        helper.make_node("ArgMax", ["scores"], ["cls"], axis=1, keepdims=0),
        helper.make_node("ReduceMax", ["scores"], ["best"], axes=[1], keepdims=0),
        helper.make_node("Greater", ["best", "thr"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Squeeze", ["nz", "axis0"], ["idx"]),
        helper.make_node("Gather", ["boxes", "idx"], ["kept_boxes"], axis=0),
        helper.make_node("Gather", ["best", "idx"], ["kept_scores"], axis=0),
        helper.make_node("Gather", ["cls", "idx"], ["kept_cls"], axis=0),
    ]
    if k_from_data:
        nodes += [helper.make_node("Greater", ["kept_scores", "thr2"], ["hi"]),
                  helper.make_node("Cast", ["hi"], ["hi64"], to=TensorProto.INT64),
                  helper.make_node("ReduceSum", ["hi64", "axis0"], ["k"], keepdims=1)]
    else:
        nodes += [helper.make_node("Shape", ["kept_scores"], ["n_kept"]),
                  helper.make_node("Min", ["n_kept", "eight"], ["k"])]
    nodes += [
        helper.make_node("TopK", ["kept_scores", "k"], ["top_scores", "top_idx"], axis=0),
        helper.make_node("Gather", ["kept_boxes", "top_idx"], ["top_boxes"], axis=0),
        helper.make_node("Gather", ["kept_cls", "top_idx"], ["top_cls"], axis=0),
        helper.make_node("Unsqueeze", ["top_boxes", "axis0"], ["b3"]),
        helper.make_node("Unsqueeze", ["top_scores", "zero"], ["s2"]),
        helper.make_node("Unsqueeze", ["s2", "zero"], ["s3"]),
        helper.make_node("NonMaxSuppression", ["b3", "s3", "max_out", "iou", "score_thr"], ["sel"]),
        helper.make_node("Gather", ["sel", "one"], ["sel_box"], axis=1),
        helper.make_node("Squeeze", ["sel_box", "one"], ["sel_idx"]),
        helper.make_node("Gather", ["top_boxes", "sel_idx"], ["final_boxes"], axis=0),
        helper.make_node("Relu", ["final_boxes"], ["out_boxes"]),
    ]
    graph = helper.make_graph(
        nodes, "detector_tail",
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [n, 5]),
         helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [n, 4])],
        [helper.make_tensor_value_info("sel", TensorProto.INT64, None),
         helper.make_tensor_value_info("top_scores", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("top_cls", TensorProto.INT64, None),
         helper.make_tensor_value_info("out_boxes", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=OPSET)


def detector_feeds(seed, n=40):
    rng = np.random.default_rng(seed)
    scores = rng.random((n, 5), dtype=np.float32) * 0.5
    scores[rng.random(n) < 0.4] += 0.45
    corner = rng.random((n, 2), dtype=np.float32) * 10
    boxes = np.concatenate([corner, corner + 1 + rng.random((n, 2), dtype=np.float32) * 3], 1)
    return {"scores": scores, "boxes": boxes}


def check(model, feeds, rep=None, oracle=ort_run):
    rep = rep or onnxjit.backend.prepare(model)
    got = rep.run(feeds)
    want = oracle(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert len(g) == len(w)
            for a, b in zip(g, w):
                np.testing.assert_allclose(a, b, rtol=1e-6)
                assert a.dtype == b.dtype and a.shape == b.shape
        else:
            assert g.dtype == w.dtype and g.shape == w.shape, (g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-6)
    return rep


@pytest.mark.parametrize("k_from_data", [False, True])
def test_detector_tail_against_onnxruntime_and_reference(k_from_data):
    model = detector_tail(k_from_data)
    rep = onnxjit.backend.prepare(model)
    assert isinstance(rep, StagedRep)
    for seed in range(4):   # different numbers of kept candidates: per-shape specializations
        feeds = detector_feeds(seed)
        check(model, feeds, rep)
        check(model, feeds, rep, ref_run)
    kinds = [kind for kind, _ in rep.stages()]
    # compiled prefix, NonZero kernel, compiled middle, ..., NMS kernel, compiled rest: no
    # node of this tail runs in Python
    assert kinds[0] == "compiled" and "python" not in kinds
    assert ("kernel", ["NonZero"]) in rep.stages()
    assert ("kernel", ["NonMaxSuppression"]) in rep.stages()
    if k_from_data:   # TopK's k computed from data starts a segment specialized on its value
        assert any(kind == "compiled" and ops[0] == "TopK" for kind, ops in rep.stages())


def test_detector_tail_with_dynamic_batch_stages_at_run_time():
    model = detector_tail(dynamic=True)
    rep = onnxjit.backend.prepare(model)
    for seed, n in ((0, 40), (1, 17), (2, 40)):
        check(model, detector_feeds(seed, n), rep)


def test_detector_prefix_stays_one_compiled_segment():
    model = detector_tail()
    rep = onnxjit.backend.prepare(model)
    rep.run(detector_feeds(0))
    first = rep.plan()[0]
    assert [n.op_type for n in first.nodes] == ["ArgMax", "ReduceMax", "Greater"]
    (inner,) = first.reps.values()
    assert inner.signatures()      # compiled by onnxjit, per shape


def make(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def tensor(name, dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_compress_on_computed_condition(axis):
    kw = {} if axis is None else {"axis": axis}
    nodes = [helper.make_node("ReduceSum", ["x", "ax"], ["s"], keepdims=0),
             helper.make_node("Reshape", ["x", "minus1"], ["flat"]),
             helper.make_node("Greater", ["s" if axis is not None else "flat", "zero"], ["c"]),
             helper.make_node("Compress", ["x", "c"], ["y"], **kw),
             helper.make_node("Mul", ["y", "y"], ["z"])]
    red = 1 - (axis if axis is not None and axis >= 0 else 1) if axis is not None else 0
    inits = [numpy_helper.from_array(np.array([red], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    model = make(nodes, [tensor("x", shape=[6, 5])], [tensor("z")], inits)
    rng = np.random.default_rng(1)
    rep = onnxjit.backend.prepare(model)
    for _ in range(3):
        check(model, {"x": rng.standard_normal((6, 5)).astype(np.float32)}, rep, ref_run)


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("sorted_", [0, 1])
def test_unique_of_computed_values(dtype, sorted_):
    nodes = [helper.make_node("Abs", ["x"], ["a"]),
             helper.make_node("Unique", ["a"], ["y", "i", "inv", "cnt"], sorted=sorted_),
             helper.make_node("Neg", ["y"], ["ny"])]
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = make(nodes, [tensor("x", t, [12])], [tensor("ny", t), tensor("i", TensorProto.INT64),
                                                tensor("inv", TensorProto.INT64),
                                                tensor("cnt", TensorProto.INT64)])
    rng = np.random.default_rng(2)
    rep = onnxjit.backend.prepare(model)
    for _ in range(3):
        x = rng.integers(-4, 5, 12).astype(dtype)
        check(model, {"x": x}, rep, ref_run)
        check(model, {"x": x}, rep, ort_run)


def test_nonzero_of_computed_mask_with_symbolic_dims():
    nodes = [helper.make_node("Greater", ["x", "zero"], ["m"]),
             helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["t"])]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero")]
    model = make(nodes, [tensor("x", shape=["a", "b", 3])], [tensor("t", TensorProto.INT64)], inits)
    rep = onnxjit.backend.prepare(model)
    rng = np.random.default_rng(3)
    for shape in ((2, 4, 3), (5, 1, 3), (2, 4, 3)):
        check(model, {"x": rng.standard_normal(shape).astype(np.float32)}, rep)
    # symbolic dims: the model compiled lazily, met NonZero at its first run and went staged
    assert isinstance(rep, onnxjit.backend.OnnxJitRep) and rep._staged is not None
    assert [kind for kind, _ in rep._staged.stages()] == ["compiled", "kernel", "compiled"]
    assert "run_graph" in rep._staged.source()


def test_sequences_split_map_concat():
    body = helper.make_graph(
        [helper.make_node("Mul", ["e", "two"], ["m"]), helper.make_node("Relu", ["m"], ["r"])],
        "body", [tensor("e", shape=None)], [tensor("r")],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    nodes = [helper.make_node("SplitToSequence", ["x", "sizes"], ["seq"], axis=0),
             helper.make_node("SequenceMap", ["seq"], ["mapped"], body=body),
             helper.make_node("SequenceLength", ["mapped"], ["n"]),
             helper.make_node("SequenceAt", ["mapped", "last"], ["tail"]),
             helper.make_node("ConcatFromSequence", ["mapped"], ["y"], axis=0)]
    inits = [numpy_helper.from_array(np.array([1, 3, 2], np.int64), "sizes"),
             numpy_helper.from_array(np.array(-1, np.int64), "last")]
    model = make(nodes, [tensor("x", shape=[6, 4])],
                 [tensor("y"), tensor("n", TensorProto.INT64), tensor("tail")], inits)
    feeds = {"x": np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32)}
    rep = check(model, feeds, oracle=ref_run)
    check(model, feeds, rep, ort_run)
    kinds = dict((ops[0], kind) for kind, ops in rep.stages())
    assert kinds["SequenceMap"] == "python"
    # the map's body is one compiled segment
    body_rep = next(iter(rep._bodies.values()))[1]
    assert [kind for kind, _ in body_rep.stages()] == ["compiled"]


def test_sequence_input_and_output():
    nodes = [helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
             helper.make_node("SequenceErase", ["s2", "zero"], ["s3"]),
             helper.make_node("ConcatFromSequence", ["s3"], ["y"], axis=0, new_axis=1)]
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3]))
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero")]
    model = make(nodes, [helper.make_value_info("s", seq_t), tensor("x", shape=[3])],
                 [helper.make_value_info("s3", seq_t), tensor("y")], inits)
    rng = np.random.default_rng(5)
    feeds = {"s": [rng.random(3, dtype=np.float32) for _ in range(3)],
             "x": rng.random(3, dtype=np.float32)}
    check(model, feeds, oracle=ref_run)


def test_loop_with_data_dependent_trip_count():
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Add", ["acc", "x"], ["acc_out"]),
         helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"])],
        "body", [tensor("i", TensorProto.INT64, []), tensor("c", TensorProto.BOOL, []),
                 tensor("acc", shape=[3])],
        [tensor("c_out", TensorProto.BOOL, []), tensor("acc_out", shape=[3]), tensor("sq", shape=[3])])
    nodes = [helper.make_node("ReduceSum", ["n"], ["m"], keepdims=0),
             helper.make_node("Loop", ["m", "true", "init"], ["acc", "sqs"], body=body)]
    model = make(nodes, [tensor("n", TensorProto.INT64, [100]), tensor("init", shape=[3]),
                         tensor("x", shape=[3])], [tensor("acc"), tensor("sqs")],
                 [numpy_helper.from_array(np.array(True), "true")])
    rep = onnxjit.backend.prepare(model)
    rng = np.random.default_rng(6)
    for total in (3, 7, 3):
        n = np.zeros(100, np.int64)
        n[:total] = 1
        feeds = {"n": n, "init": rng.random(3, dtype=np.float32),
                 "x": rng.random(3, dtype=np.float32)}
        check(model, feeds, rep, ref_run)
    assert ("python", ["Loop"]) in rep.stages()


def test_reshape_to_a_shape_computed_from_data():
    nodes = [helper.make_node("ReduceMax", ["s"], ["m"], keepdims=1),
             helper.make_node("Concat", ["m", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"]),
             helper.make_node("Softmax", ["y"], ["z"], axis=-1)]
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    model = make(nodes, [tensor("x", shape=[24]), tensor("s", TensorProto.INT64, [100])],
                 [tensor("z")], inits)
    rep = onnxjit.backend.prepare(model)
    x = np.random.default_rng(7).standard_normal(24).astype(np.float32)
    for rows in (2, 3, 4, 2):
        s = np.ones(100, np.int64)
        s[50] = rows
        check(model, {"x": x, "s": s}, rep, ort_run)


def test_nms_matches_reference_on_random_boxes():
    nodes = [helper.make_node("NonMaxSuppression", ["b", "s", "mo", "iou", "st"], ["sel"],
                              center_point_box=1)]
    model = make(nodes, [tensor("b", shape=[2, 30, 4]), tensor("s", shape=[2, 3, 30]),
                         tensor("mo", TensorProto.INT64, [1]), tensor("iou", shape=[1]),
                         tensor("st", shape=[1])], [tensor("sel", TensorProto.INT64)])
    rng = np.random.default_rng(8)
    rep = onnxjit.backend.prepare(model)
    for _ in range(3):
        b = rng.random((2, 30, 4), dtype=np.float32) * 5
        s = rng.random((2, 3, 30), dtype=np.float32)
        s[0, 0, :5] = s[0, 0, 5]      # ties: lower box index first
        feeds = {"b": b, "s": s, "mo": np.array([6]), "iou": np.array([0.3], np.float32),
                 "st": np.array([0.2], np.float32)}
        check(model, feeds, rep, ref_run)
        check(model, feeds, rep, ort_run)


def test_bad_inputs_name_the_node():
    nodes = [helper.make_node("NonMaxSuppression", ["b", "s"], ["sel"], name="nms")]
    model = make(nodes, [tensor("b", shape=None), tensor("s", shape=None)],
                 [tensor("sel", TensorProto.INT64)])
    rep = onnxjit.backend.prepare(model)
    with pytest.raises(KernelError, match="nms"):
        rep.run({"b": np.zeros((1, 3, 4), np.float32), "s": np.zeros((1, 1, 4), np.float32)})
    seq = make([helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")],
               [helper.make_value_info("s", helper.make_sequence_type_proto(
                   helper.make_tensor_type_proto(TensorProto.FLOAT, None))),
                tensor("p", TensorProto.INT64, [])], [tensor("y")])
    rep = onnxjit.backend.prepare(seq)
    with pytest.raises(KernelError, match="at.*out of range"):
        rep.run({"s": [np.zeros(2, np.float32)], "p": np.array(3)})


def test_python_segments_are_counted():
    staged.python_segments.clear()
    test_sequence_input_and_output()
    assert sum(staged.python_segments.values()) >= 3
    assert {op for op, _ in staged.python_segments} >= {"SequenceInsert", "SequenceErase"}


def test_wrong_kinds_of_input_are_refused_and_reps_pickle():
    import pickle
    from onnxjit.errors import InputError
    nodes = [helper.make_node("SequenceLength", ["s"], ["n"]),
             helper.make_node("Add", ["n", "x"], ["y"])]
    seq_t = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    model = make(nodes, [helper.make_value_info("s", seq_t), tensor("x", TensorProto.INT64, [])],
                 [tensor("y", TensorProto.INT64)])
    rep = onnxjit.backend.prepare(model)
    with pytest.raises(InputError, match="'s'.*expected a sequence"):
        rep.run({"s": np.zeros(3, np.float32), "x": np.array(1)})
    with pytest.raises(InputError, match="'x'.*expected a tensor"):
        rep.run({"s": [np.zeros(3, np.float32)], "x": [np.array(1)]})
    with pytest.raises(InputError, match="'s'.*not an optional"):
        rep.run({"s": None, "x": np.array(1)})
    copy = pickle.loads(pickle.dumps(rep))
    feeds = {"s": [np.zeros(3, np.float32)] * 4, "x": np.array(2)}
    check(model, feeds, copy, ref_run)


@pytest.mark.parametrize("length", [1, 5, 80])
def test_scan_unrolled_compiled_or_staged(length):
    """Scan-9+ with state, two scan inputs (one reversed, one along axis 1) and two scan outputs
    (one reversed, one along axis 1): unrolled into compiled code up to 64 steps, else a Python
    loop over the compiled body; against onnxruntime (the reference scans forward only)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a"], ["s_out"]),
         helper.make_node("Mul", ["s_out", "b"], ["y1"]),
         helper.make_node("Tanh", ["y1"], ["y2"])],
        "body", [tensor("s_in", shape=[3]), tensor("a", shape=[3]), tensor("b", shape=[3])],
        [tensor("s_out", shape=[3]), tensor("y1", shape=[3]), tensor("y2", shape=[3])])
    node = helper.make_node("Scan", ["s0", "xa", "xb"], ["s", "o1", "o2"], body=body,
                            num_scan_inputs=2, scan_input_axes=[0, 1],
                            scan_input_directions=[1, 0], scan_output_axes=[0, -1],
                            scan_output_directions=[1, 0])
    model = make([node], [tensor("s0", shape=[3]), tensor("xa", shape=[length, 3]),
                          tensor("xb", shape=[3, length])],
                 [tensor("s"), tensor("o1"), tensor("o2")])
    rng = np.random.default_rng(9)
    feeds = {"s0": rng.random(3, dtype=np.float32),
             "xa": rng.random((length, 3), dtype=np.float32),
             "xb": rng.random((3, length), dtype=np.float32)}
    rep = check(model, feeds, oracle=ort_run)
    if length <= 64:
        assert not isinstance(rep, StagedRep)
    else:
        assert ("python", ["Scan"]) in rep.stages()


def test_range_with_bounds_computed_from_data():
    nodes = [helper.make_node("ReduceMax", ["x"], ["hi"], keepdims=0),
             helper.make_node("Cast", ["hi"], ["limit"], to=TensorProto.INT64),
             helper.make_node("Range", ["zero", "limit", "one"], ["r"]),
             helper.make_node("Mul", ["r", "r"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array(1, np.int64), "one")]
    model = make(nodes, [tensor("x", shape=[100])], [tensor("y", TensorProto.INT64)], inits)
    rep = onnxjit.backend.prepare(model)
    rng = np.random.default_rng(10)
    for top in (5, 9, 5):
        x = rng.random(100, dtype=np.float32) * top
        x[3] = top + 0.5
        check(model, {"x": x}, rep, ort_run)
    # the Range starts a segment specialized on its bound: one compile per distinct value
    (seg,) = [s for s in rep.plan() if getattr(s, "nodes", [None])[0].op_type == "Range"]
    (inner,) = seg.reps.values()
    assert len(inner.signatures()) == 2


@pytest.mark.parametrize("computed_position", [False, True])
def test_sequences_inside_a_graph_compile(computed_position):
    """Sequences made and read inside a graph with tensor inputs and outputs compile (held as
    lists of Values while specializing); a position computed from data stages the graph,
    the sequences then being Python lists."""
    nodes = [helper.make_node("SplitToSequence", ["x", "two"], ["seq"], axis=1),
             helper.make_node("SequenceInsert", ["seq", "z", "zero"], ["seq2"]),
             helper.make_node("SequenceErase", ["seq2", "minus1"], ["seq3"]),
             helper.make_node("SequenceLength", ["seq3"], ["n"]),
             helper.make_node("ArgMax", ["p"], ["pos"], keepdims=0),
             helper.make_node("SequenceAt", ["seq3", "pos" if computed_position else "one"],
                              ["item"]),
             helper.make_node("ConcatFromSequence", ["seq3"], ["cat"], axis=0),
             helper.make_node("ConcatFromSequence", ["seq3"], ["stacked"], axis=-1, new_axis=1)]
    i64 = lambda v, name: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    inits = [i64(2, "two"), i64(0, "zero"), i64(-1, "minus1"), i64(1, "one")]
    model = make(nodes, [tensor("x", shape=[3, 6]), tensor("z", shape=[3, 2]),
                         tensor("p", shape=[100])],
                 [tensor("n", TensorProto.INT64), tensor("item"), tensor("cat"),
                  tensor("stacked")], inits)
    rng = np.random.default_rng(11)
    rep = onnxjit.backend.prepare(model)
    assert isinstance(rep, StagedRep) == computed_position
    for _ in range(2):
        p = rng.random(100, dtype=np.float32)
        p[rng.integers(3)] = 2.0        # the position: 0, 1 or 2
        feeds = {"x": rng.random((3, 6), dtype=np.float32),
                 "z": rng.random((3, 2), dtype=np.float32), "p": p}
        check(model, feeds, rep, ref_run)
        check(model, feeds, rep, ort_run)


def test_scan8_with_batch_axis_compiles():
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "a"], ["s_out"]),
         helper.make_node("Sin", ["s_out"], ["y"])],
        "body", [tensor("s_in", shape=[2]), tensor("a", shape=[2])],
        [tensor("s_out", shape=[2]), tensor("y", shape=[2])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1,
                            directions=[1])
    model = make([node], [tensor("s0", shape=[3, 2]), tensor("x", shape=[3, 4, 2])],
                 [tensor("s"), tensor("ys")], opset=8)
    rng = np.random.default_rng(12)
    feeds = {"s0": rng.random((3, 2), dtype=np.float32),
             "x": rng.random((3, 4, 2), dtype=np.float32)}
    rep = check(model, feeds, oracle=ort_run)
    assert not isinstance(rep, StagedRep)
