"""Tree ensembles (ai.onnx.ml TreeEnsembleRegressor/Classifier opsets 1 and 3, TreeEnsemble
opset 5) against onnxruntime and onnx's ReferenceEvaluator, on random helper-built forests."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxjit.backend
from helpers import NP_TO_ONNX

ORDER_MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT")
ALL_MODES = ORDER_MODES + ("BRANCH_EQ", "BRANCH_NEQ")


def random_trees(rng, n_trees, depth, n_features, modes=("BRANCH_LEQ",), nan_true=0.0,
                 full=False, values=None):
    """nodes_* attributes of `n_trees` random trees up to `depth` deep, and their leaves as
    [(tree id, node id)]. `values`: thresholds to pick from (EQ/NEQ need hits)."""
    cols = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                            "nodes_values", "nodes_truenodeids", "nodes_falsenodeids",
                            "nodes_missing_value_tracks_true")}
    leaves = []

    def grow(t, d, ids):
        me, i = len(ids), len(cols["nodes_treeids"])
        ids.append(me)
        for k in cols:
            cols[k].append(0)
        cols["nodes_treeids"][i], cols["nodes_nodeids"][i] = t, me
        if d == depth or (not full and d > 1 and rng.random() < 0.25):
            cols["nodes_modes"][i], cols["nodes_values"][i] = "LEAF", 0.0
            leaves.append((t, me))
            return me
        cols["nodes_modes"][i] = str(rng.choice(modes))
        cols["nodes_featureids"][i] = int(rng.integers(n_features))
        v = rng.choice(values) if values is not None else rng.standard_normal()
        cols["nodes_values"][i] = float(np.float32(v))
        cols["nodes_missing_value_tracks_true"][i] = int(rng.random() < nan_true)
        cols["nodes_truenodeids"][i] = grow(t, d + 1, ids)
        cols["nodes_falsenodeids"][i] = grow(t, d + 1, ids)
        return me

    for t in range(n_trees):
        grow(t, 0, [])
    if not nan_true:
        del cols["nodes_missing_value_tracks_true"]
    return cols, leaves


def ml_model(node, x, outputs, ml_opset=3):
    graph = helper.make_graph(
        [node], "trees", [helper.make_tensor_value_info("x", NP_TO_ONNX[x.dtype], [None, x.shape[1]])],
        [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("ai.onnx.ml", ml_opset)])
    model.ir_version = 10
    return model


def rows(rng, n, f, dtype=np.float32, nan=0.1, grid=None):
    x = rng.standard_normal((n, f)) if grid is None else rng.choice(grid, (n, f))
    if nan:
        x[rng.random(x.shape) < nan] = np.nan
    return x.astype(dtype)


def run_ort(model, x):
    return ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})


def check_ort(model, x, reference=False, rtol=1e-5, atol=1e-6, ort_model=None, columns=None):
    """onnxjit's outputs equal onnxruntime's (on `ort_model` if given; the first `columns` of
    2-D outputs only if given) and the ReferenceEvaluator's if asked."""
    expected = run_ort(ort_model or model, x)
    got = onnxjit.backend.prepare(model).run([x])
    if columns is not None:
        expected = [e[:, :columns] if e.ndim == 2 else e for e in expected]
        got = [g[:, :columns] if g.ndim == 2 else g for g in got]
    oracles = [expected]
    if reference:
        from onnx.reference import ReferenceEvaluator
        oracles.append(ReferenceEvaluator(model).run(None, {"x": x}))
    for want in oracles:   # the evaluator answers float64 where ORT (and the spec) say float
        assert len(got) == len(want)
        for g, e, o in zip(got, want, expected):
            e = np.asarray(e)
            assert g.shape == e.shape, (g.shape, e.shape)
            if e.dtype.kind == "f":
                assert g.dtype == o.dtype
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
            else:
                assert g.dtype == e.dtype or (g.dtype == object and e.dtype.kind in "OU")
                np.testing.assert_array_equal(g, e)
    return got


def leaf_weights(rng, leaves, n_targets, every_target=False, prefix="target"):
    t, n, i, w = [], [], [], []
    for tree, node in leaves:
        targets = range(n_targets) if every_target else [int(rng.integers(n_targets))]
        for target in targets:
            t.append(tree)
            n.append(node)
            i.append(target)
            w.append(float(np.float32(rng.standard_normal())))
    return {f"{prefix}_treeids": t, f"{prefix}_nodeids": n, f"{prefix}_ids": i,
            f"{prefix}_weights": w}


REGRESSOR_CASES = [
    # (modes, nan_true, n_targets, aggregate, post_transform, base_values, every_target)
    (("BRANCH_LEQ",), 0.0, 1, "SUM", "NONE", [0.5], False),
    (ORDER_MODES, 0.3, 1, "SUM", "NONE", None, False),
    (ORDER_MODES, 0.3, 1, "AVERAGE", "LOGISTIC", [1.5], False),
    (ORDER_MODES, 0.0, 1, "MIN", "NONE", [0.25], False),
    (ORDER_MODES, 0.5, 1, "MAX", "PROBIT", None, False),
    (("BRANCH_LT",), 0.0, 3, "SUM", "NONE", [0.1, 0.2, 0.3], False),
    (ORDER_MODES, 0.2, 3, "SUM", "SOFTMAX", None, True),
    (ORDER_MODES, 0.0, 3, "AVERAGE", "SOFTMAX_ZERO", [0.0, 1.0, -1.0], False),
    (ORDER_MODES, 0.0, 3, "MIN", "LOGISTIC", [0.1, 0.2, 0.3], False),
    (ORDER_MODES, 0.3, 4, "MAX", "NONE", [1.0, 2.0, 3.0, 4.0], False),
    (("BRANCH_GTE", "BRANCH_GT"), 0.0, 2, "SUM", "PROBIT", None, True),
]


@pytest.mark.parametrize("modes,nan_true,n_targets,agg,post,base,every", REGRESSOR_CASES)
def test_tree_ensemble_regressor(modes, nan_true, n_targets, agg, post, base, every):
    rng = np.random.default_rng(len(modes) * 7 + n_targets)
    cols, leaves = random_trees(rng, 5, 4, 4, modes, nan_true)
    attrs = dict(cols, n_targets=n_targets, aggregate_function=agg, post_transform=post,
                 **leaf_weights(rng, leaves, n_targets, every))
    if base is not None:
        attrs["base_values"] = base
    if post == "PROBIT":   # probit needs scores in (0, 1)
        attrs["target_weights"] = [abs(w) / 20 for w in attrs["target_weights"]]
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    x = rows(rng, 37, 4)
    check_ort(ml_model(node, x, ["y"]), x)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_tree_ensemble_regressor_input_types(dtype):
    rng = np.random.default_rng(3)
    cols, leaves = random_trees(rng, 3, 3, 3, ORDER_MODES, values=[-1.5, 0.0, 1.0, 2.5])
    attrs = dict(cols, n_targets=1, **leaf_weights(rng, leaves, 1))
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    x = rows(rng, 20, 3, dtype, nan=0, grid=[-2, -1, 0, 1, 2, 3])
    if dtype == np.float64:
        check_ort(ml_model(node, x, ["y"]), x, reference=True)
        return
    # onnxruntime has no integer kernel at opset 3: compare with its answer for float64 rows.
    want = check_ort(ml_model(node, x.astype(np.float64), ["y"]), x.astype(np.float64))
    got = onnxjit.backend.prepare(ml_model(node, x, ["y"])).run([x])
    np.testing.assert_array_equal(got[0], want[0])


def test_tree_ensemble_regressor_eq_neq_and_as_tensor():
    """Opset 3's *_as_tensor (double) attributes; BRANCH_EQ / BRANCH_NEQ on exact values."""
    rng = np.random.default_rng(4)
    grid = [-1.0, 0.0, 0.5, 2.0]
    cols, leaves = random_trees(rng, 4, 4, 3, ALL_MODES, 0.3, values=grid)
    w = leaf_weights(rng, leaves, 2)
    attrs = {k: v for k, v in cols.items() if k != "nodes_values"}
    attrs["nodes_values_as_tensor"] = numpy_helper.from_array(
        np.array(cols["nodes_values"], np.float64) + 1e-12, "v")   # not float32 values
    attrs["target_weights_as_tensor"] = numpy_helper.from_array(
        np.array(w.pop("target_weights"), np.float64), "w")
    attrs["base_values_as_tensor"] = numpy_helper.from_array(np.array([0.5, -0.5]), "b")
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            n_targets=2, **attrs, **w)
    x = rows(rng, 40, 3, np.float64, nan=0.1, grid=np.array(grid) + 1e-12)
    check_ort(ml_model(node, x, ["y"]), x)


def test_tree_ensemble_regressor_large_batch_runs_in_row_blocks():
    """More rows than one block (and than the threaded threshold), a 1-D input too."""
    rng = np.random.default_rng(5)
    cols, leaves = random_trees(rng, 6, 5, 6, ORDER_MODES, 0.2)
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            n_targets=1, **cols, **leaf_weights(rng, leaves, 1))
    x = rows(rng, 333, 6)
    check_ort(ml_model(node, x, ["y"]), x)


CLASSIFIER_CASES = [
    # (classes, weights on: "one" class id / "all" classes, negative weights, base, post)
    (3, "all", False, None, "NONE"),
    (3, "one", True, [0.1, -0.2, 0.3], "SOFTMAX"),
    (4, "all", False, None, "SOFTMAX_ZERO"),
    (3, "all", True, [0.5, 0.0, 0.25], "LOGISTIC"),
    (2, "all", False, None, "NONE"),
    (2, "all", True, [0.3, 0.3], "LOGISTIC"),
    (2, "all", True, [0.3], "NONE"),
    (2, "one0", False, None, "NONE"),         # binary case, positive weights
    (2, "one0", True, None, "LOGISTIC"),      # binary case, mixed weights
    (2, "one1", True, [0.2], "NONE"),
    (2, "one1", False, [0.2, 0.2], "NONE"),
    (2, "one0", True, [-0.1, -0.1], "LOGISTIC"),
    (2, "one0", False, [0.1], "PROBIT"),
]


def classifier_attrs(rng, classes, weights_on, negative, cols, leaves):
    if weights_on == "all":
        w = leaf_weights(rng, leaves, classes, every_target=True, prefix="class")
    else:
        w = leaf_weights(rng, leaves, 1, prefix="class")
        if weights_on == "one1":
            w["class_ids"] = [1] * len(w["class_ids"])
        elif weights_on == "one":
            w["class_ids"] = [int(rng.integers(classes)) for _ in w["class_ids"]]
    w["class_weights"] = [v if negative else abs(v) / 4 for v in w["class_weights"]]
    return dict(cols, **w)


@pytest.mark.parametrize("classes,weights_on,negative,base,post", CLASSIFIER_CASES)
def test_tree_ensemble_classifier(classes, weights_on, negative, base, post):
    rng = np.random.default_rng(classes * 11 + len(CLASSIFIER_CASES))
    cols, leaves = random_trees(rng, 4, 4, 4, ORDER_MODES, 0.2)
    attrs = classifier_attrs(rng, classes, weights_on, negative, cols, leaves)
    if post == "PROBIT":
        attrs["class_weights"] = [w / 8 for w in attrs["class_weights"]]
    if base is not None:
        attrs["base_values"] = base
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probs"],
                            domain="ai.onnx.ml", post_transform=post,
                            classlabels_int64s=list(range(classes)), **attrs)
    x = rows(rng, 41, 4)
    # Two classes under PROBIT: onnxruntime writes one score and leaves the second column
    # uninitialized; its float32 erfinv approximation is touchy near 0.5.
    binary_probit = post == "PROBIT" and classes == 2
    check_ort(ml_model(node, x, ["label", "probs"]), x, columns=1 if binary_probit else None,
              rtol=1e-3 if post == "PROBIT" else 1e-5)


@pytest.mark.parametrize("classes,weights_on", [(3, "all"), (2, "one0"), (2, "all")])
def test_tree_ensemble_classifier_labels(classes, weights_on):
    """String labels come out of the Python step after the graph; int64 labels as given."""
    rng = np.random.default_rng(8)
    cols, leaves = random_trees(rng, 3, 3, 3, ORDER_MODES)
    attrs = classifier_attrs(rng, classes, weights_on, False, cols, leaves)
    x = rows(rng, 25, 3, nan=0)
    for labels in ({"classlabels_strings": ["cat", "dog", "emu"][:classes]},
                   {"classlabels_int64s": [7, 3, 11][:classes]}):
        node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probs"],
                                domain="ai.onnx.ml", **attrs, **labels)
        got = check_ort(ml_model(node, x, ["label", "probs"], ml_opset=1), x)
        if "classlabels_strings" in labels:
            assert got[0].dtype == object and isinstance(got[0][0], str)


def v5_node(rng, n_trees, depth, n_features, n_targets, member=False, dtype=np.float32, **kw):
    """A TreeEnsemble (opset 5) node from random classic trees: same shape, leaves apart."""
    modes = ORDER_MODES + (("BRANCH_EQ", "BRANCH_NEQ") if member else ())
    grid = [-1.0, 0.0, 0.5, 2.0]
    cols, _ = random_trees(rng, n_trees, depth, n_features, modes, 0.2, values=grid)
    code = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
            "BRANCH_NEQ": 6}   # NEQ rows become set membership
    key = {(t, i): k for k, (t, i) in enumerate(zip(cols["nodes_treeids"], cols["nodes_nodeids"]))}
    inner = [k for k, m in enumerate(cols["nodes_modes"]) if m != "LEAF"]
    pos = {k: j for j, k in enumerate(inner)}
    leaf_pos, leaf_t, leaf_w, a = {}, [], [], {k: [] for k in (
        "truenodeids", "trueleafs", "falsenodeids", "falseleafs")}
    members = []
    for k in inner:
        t = cols["nodes_treeids"][k]
        for side in ("true", "false"):
            c = key[(t, cols[f"nodes_{side}nodeids"][k])]
            if cols["nodes_modes"][c] == "LEAF":
                leaf_pos.setdefault(c, len(leaf_t))
                if len(leaf_pos) > len(leaf_t):
                    leaf_t.append(int(rng.integers(n_targets)))
                    leaf_w.append(float(rng.standard_normal()))
                a[f"{side}nodeids"].append(leaf_pos[c])
                a[f"{side}leafs"].append(1)
            else:
                a[f"{side}nodeids"].append(pos[c])
                a[f"{side}leafs"].append(0)
        if cols["nodes_modes"][k] == "BRANCH_NEQ":
            # onnxruntime holds set members as int32
            members += list(rng.choice([-1.0, 2.0, 3.0], 2, replace=False)) + [np.nan]
    roots = [pos[key[(t, 0)]] for t in range(n_trees)]
    mode = np.array([code[cols["nodes_modes"][k]] for k in inner], np.uint8)
    extra = {"membership_values": numpy_helper.from_array(np.array(members, dtype), "m")} \
        if members else {}
    return helper.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", n_targets=n_targets,
        tree_roots=roots, nodes_modes=numpy_helper.from_array(mode, "modes"),
        nodes_featureids=[cols["nodes_featureids"][k] for k in inner],
        nodes_splits=numpy_helper.from_array(
            np.array([cols["nodes_values"][k] for k in inner], dtype), "splits"),
        nodes_missing_value_tracks_true=[cols["nodes_missing_value_tracks_true"][k] for k in inner],
        **{f"nodes_{k}": v for k, v in a.items()}, leaf_targetids=leaf_t,
        leaf_weights=numpy_helper.from_array(np.array(leaf_w, dtype), "w"), **extra, **kw)


@pytest.mark.parametrize("dtype,member,n_targets,agg,post", [
    (np.float32, False, 1, 1, 0),
    (np.float32, True, 3, 0, 1),
    (np.float64, True, 2, 1, 0),
    (np.float64, False, 3, 3, 2),
    (np.float32, True, 1, 2, 0),   # one target: onnxruntime's MIN of an unscored target varies
    (np.float64, True, 1, 3, 4),
])
def test_tree_ensemble_v5(dtype, member, n_targets, agg, post):
    rng = np.random.default_rng(n_targets * 5 + agg)
    node = v5_node(rng, 4, 4, 3, n_targets, member, dtype, aggregate_function=agg,
                   post_transform=post)
    x = rows(rng, 30, 3, dtype, nan=0.1, grid=[-1.0, 0.0, 0.5, 2.0, 3.0])
    model = ml_model(node, x, ["y"], ml_opset=5)
    # onnxruntime reads post_transform 1 as LOGISTIC and 2 as SOFTMAX (the spec: 1 SOFTMAX,
    # 2 LOGISTIC); the reference evaluator ignores it.
    ort_model = model
    if post in (1, 2):
        ort_model = ml_model(v5_node(np.random.default_rng(n_targets * 5 + agg), 4, 4, 3,
                                     n_targets, member, dtype, aggregate_function=agg,
                                     post_transform=3 - post), x, ["y"], ml_opset=5)
    check_ort(model, x, reference=(post == 0), ort_model=ort_model,
              rtol=1e-5 if dtype == np.float32 else 1e-6)


def test_tree_ensemble_refuses_bad_feature_ids():
    rng = np.random.default_rng(9)
    cols, leaves = random_trees(rng, 2, 3, 3)
    cols["nodes_featureids"] = [f + 5 if m != "LEAF" else 0
                                for f, m in zip(cols["nodes_featureids"], cols["nodes_modes"])]
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            n_targets=1, **cols, **leaf_weights(rng, leaves, 1))
    x = rows(rng, 4, 3)
    with pytest.raises(Exception, match="feature"):
        onnxjit.backend.prepare(ml_model(node, x, ["y"])).run([x])


def test_string_labels_feeding_another_node_are_refused():
    """String labels exist only after the compiled graph: a node computing from them is
    refused (Identity passes them on, as skl2onnx's graphs do: tests/ops/test_ops_ml_sklearn.py)."""
    rng = np.random.default_rng(10)
    cols, leaves = random_trees(rng, 2, 3, 3)
    attrs = classifier_attrs(rng, 3, "all", False, cols, leaves)
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probs"],
                            domain="ai.onnx.ml", classlabels_strings=["a", "b", "c"], **attrs)
    ident = helper.make_node("Cast", ["label"], ["label2"], to=TensorProto.INT64)
    graph = helper.make_graph([node, ident], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [4, 3])], [helper.make_empty_tensor_value_info("label2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("ai.onnx.ml", 3)])
    with pytest.raises(Exception, match="read by a node"):
        onnxjit.backend.prepare(model).run([rows(rng, 4, 3)])


@pytest.mark.parametrize("modes,nan_true,n_targets,agg,post,base,every",
                         [REGRESSOR_CASES[1], REGRESSOR_CASES[3], REGRESSOR_CASES[6],
                          REGRESSOR_CASES[9]])
def test_few_rows_split_the_trees_over_threads(modes, nan_true, n_targets, agg, post, base, every):
    """Below PAR_MIN_ROWS rows, a forest of enough row x tree walks splits its trees over the
    threads (each thread its own sums, merged in thread order): SUM, MIN, MAX and the dense
    every-target leaves agree with ORT on 2 threads and with the 1-thread run."""
    from tests.helpers import numba_threads

    from onnxjit.kernels import trees
    rng = np.random.default_rng(11 + n_targets)
    cols, leaves = random_trees(rng, 64, 5, 6, modes, nan_true)
    attrs = dict(cols, n_targets=n_targets, aggregate_function=agg, post_transform=post,
                 **leaf_weights(rng, leaves, n_targets, every))
    if base is not None:
        attrs["base_values"] = base
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml", **attrs)
    x = rows(rng, 40, 6)
    assert 40 < trees.PAR_MIN_ROWS and 40 * 64 >= trees.PAR_MIN_WALKS
    model = ml_model(node, x, ["y"])
    rep = onnxjit.backend.prepare(model)
    with numba_threads(1):
        one = rep.run([x])[0]
    with numba_threads(2):
        two = check_ort(model, x)[0]
    np.testing.assert_allclose(two, one, rtol=1e-12, atol=1e-12)
