"""Converted scikit-learn models: the graphs skl2onnx 1.20 emits (target opset 17, ai.onnx.ml 1)
for a logistic regression (int64 and string labels), a StandardScaler + LogisticRegression
pipeline, SVCs (decision function and probabilities), an SVR and a OneHotEncoder +
LinearRegression pipeline, rebuilt with onnx.helper (node for node, attribute for attribute;
parameters drawn at random, as no scikit-learn is needed) and checked against onnxruntime,
ZipMap's list of dicts included."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxjit.backend

ML = "ai.onnx.ml"
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def model(nodes, x_type, n_features, outputs, inits=()):
    """A skl2onnx-style model: input X [None, n_features]; outputs [(name, type proto)]."""
    graph = helper.make_graph(
        nodes, "skl2onnx", [helper.make_tensor_value_info("X", x_type, [None, n_features])],
        [helper.make_value_info(name, t) for name, t in outputs],
        [numpy_helper.from_array(np.asarray(v), name) for name, v in inits])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid(ML, 1)])
    m.ir_version = 8
    return m


def label_type(strings):
    return helper.make_tensor_type_proto(TensorProto.STRING if strings else I64, [None])


def zipmap_type(strings):
    key = TensorProto.STRING if strings else I64
    return helper.make_sequence_type_proto(
        helper.make_map_type_proto(key, helper.make_tensor_type_proto(F, [])))


def classifier_outputs(strings):
    return [("output_label", label_type(strings)),
            ("output_probability", zipmap_type(strings))]


def zipmap(scores, labels):
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
    return helper.make_node("ZipMap", [scores], ["output_probability"], name="ZipMap",
                            domain=ML, **{key: labels})


def label_out(labels):
    """skl2onnx's last step on the label: Cast to int64 for ints, Identity for strings."""
    if isinstance(labels[0], str):
        return helper.make_node("Identity", ["label"], ["output_label"], name="Identity")
    return helper.make_node("Cast", ["label"], ["output_label"], name="Cast", to=I64)


def linear_classifier(rng, x_name, f, labels, out):
    """LogisticRegression's LinearClassifier: binary as two rows (-w, w) under LOGISTIC,
    multinomial under SOFTMAX (multi_class=1)."""
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
    if len(labels) == 2:
        w, b = rng.standard_normal(f), rng.standard_normal()
        coef, intercepts, post, multi = np.concatenate([-w, w]), [-b, b], "LOGISTIC", 0
    else:
        coef = rng.standard_normal(len(labels) * f)
        intercepts, post, multi = rng.standard_normal(len(labels)).tolist(), "SOFTMAX", 1
    return helper.make_node("LinearClassifier", [x_name], ["label", out], name="LinearClassifier",
                            domain=ML, coefficients=coef.astype(np.float32).tolist(),
                            intercepts=[float(v) for v in intercepts], multi_class=multi,
                            post_transform=post, **{key: labels})


def logistic_regression(rng, f, labels, scaler=False):
    nodes, x = [], "X"
    if scaler:   # StandardScaler
        nodes.append(helper.make_node("Scaler", ["X"], ["variable"], name="Scaler", domain=ML,
                                      offset=rng.random(f).tolist(),
                                      scale=(1 + rng.random(f)).tolist()))
        x = "variable"
    if len(labels) == 2 and not scaler:
        nodes += [linear_classifier(rng, x, f, labels, "probabilities"), label_out(labels),
                  zipmap("probabilities", labels)]
    else:
        nodes += [linear_classifier(rng, x, f, labels, "probability_tensor"), label_out(labels),
                  helper.make_node("Normalizer", ["probability_tensor"], ["probabilities"],
                                   name="Normalizer", domain=ML, norm="L1"),
                  zipmap("probabilities", labels)]
    return model(nodes, F, f, classifier_outputs(isinstance(labels[0], str)))


def svm_classifier(rng, f, labels, proba, kernel="RBF"):
    nc = len(labels)
    per = rng.integers(2, 6, nc)
    nv, npairs = int(per.sum()), nc * (nc - 1) // 2
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
    attrs = dict(coefficients=rng.standard_normal((nc - 1) * nv).tolist(),
                 kernel_params=[float(rng.random()), 0.0, 3.0], kernel_type=kernel,
                 post_transform="NONE", rho=rng.standard_normal(npairs).tolist(),
                 support_vectors=rng.random(nv * f).tolist(), vectors_per_class=per.tolist(),
                 **{key: labels})
    if proba:
        attrs.update(prob_a=(-1 - 3 * rng.random(npairs)).tolist(),
                     prob_b=(0.1 * rng.standard_normal(npairs)).tolist())
    return helper.make_node("SVMClassifier", ["X"], ["label", "SVM02"], name="SVMClassifier",
                            domain=ML, **attrs)


def svc(rng, f, labels, proba):
    """SVC(probability=True) and a binary SVC: scores to ZipMap; a multi-class SVC without
    probabilities: skl2onnx's ovr decision function (votes + scaled confidences) from the
    one-vs-one scores."""
    nodes = [svm_classifier(rng, f, labels, proba)]
    strings = isinstance(labels[0], str)
    if proba or len(labels) == 2:
        nodes += [helper.make_node("Cast", ["SVM02"], ["probabilities"], name="Cast1", to=F),
                  label_out(labels), zipmap("probabilities", labels)]
        return model(nodes, F, f, classifier_outputs(strings))
    n = len(labels)
    mk = helper.make_node
    nodes += [mk("Cast", ["SVM02"], ["before_ovr"], to=F), label_out(labels),
              mk("Less", ["before_ovr", "cst0"], ["negative"]),
              mk("Neg", ["before_ovr"], ["neg"]), mk("Cast", ["negative"], ["inegative"], to=F)]
    inits = [("cst0", np.float32(0)), ("cst1", np.float32(1)), ("cst3", np.float32(3))]
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    conf = {c: [] for c in range(n)}
    vote = {c: [] for c in range(n)}
    for k, (i, j) in enumerate(pairs):
        inits.append((f"Cind_{k}", np.int64(k)))
        nodes += [mk("ArrayFeatureExtractor", ["neg", f"Cind_{k}"], [f"Csvc_{k}"], domain=ML),
                  mk("ArrayFeatureExtractor", ["inegative", f"Cind_{k}"], [f"Vsvcv_{k}"],
                     domain=ML),
                  mk("Neg", [f"Csvc_{k}"], [f"Cneg_{k}"]),
                  mk("Neg", [f"Vsvcv_{k}"], [f"Vnegv_{k}"]),
                  mk("Add", [f"Vnegv_{k}", "cst1"], [f"Vnegv1_{k}"])]
        conf[i].append(f"Cneg_{k}")     # -(-score): class i wins on a positive score
        conf[j].append(f"Csvc_{k}")
        vote[i].append(f"Vnegv1_{k}")   # 1 - negative
        vote[j].append(f"Vsvcv_{k}")
    for c in range(n):
        nodes += [mk("Sum", conf[c], [f"svcsumc_{c}"]), mk("Sum", vote[c], [f"svcvote_{c}"])]
    nodes += [mk("Concat", [f"svcsumc_{c}" for c in range(n)], ["Csvcconc"], axis=1),
              mk("Abs", ["Csvcconc"], ["Cabs"]), mk("Add", ["Cabs", "cst1"], ["Cconc_abs1"]),
              mk("Concat", [f"svcvote_{c}" for c in range(n)], ["Vsvcconcv"], axis=1),
              mk("Mul", ["Cconc_abs1", "cst3"], ["Cconc_abs3"]),
              mk("Div", ["Csvcconc", "Cconc_abs3"], ["Csvcfinal"]),
              mk("Add", ["Vsvcconcv", "Csvcfinal"], ["ovr_output"]),
              zipmap("ovr_output", labels)]
    return model(nodes, F, f, classifier_outputs(strings), inits)


def svr(rng, f):
    n = 7
    node = helper.make_node("SVMRegressor", ["X"], ["SVM03"], name="SVMRegressor", domain=ML,
                            coefficients=rng.standard_normal(n).tolist(),
                            kernel_params=[float(rng.random()), 0.0, 3.0], kernel_type="RBF",
                            n_supports=n, post_transform="NONE", rho=[0.5],
                            support_vectors=rng.random(n * f).tolist())
    cast = helper.make_node("Cast", ["SVM03"], ["variable"], name="Cast", to=F)
    return model([node, cast], F, f, [("variable", helper.make_tensor_type_proto(F, [None, 1]))])


def one_hot_linear(rng, columns, cats):
    """OneHotEncoder on int64 columns (one encoder per column, zeros=0) + LinearRegression."""
    nodes, parts, inits = [], [], []
    for c in range(columns):
        inits.append((f"X{c}", np.array([c], np.int64)))
        nodes += [helper.make_node("Gather", ["X", f"X{c}"], [f"X{c}1"], axis=1),
                  helper.make_node("Cast", [f"X{c}1"], [f"X{c}1cast"], to=I64),
                  helper.make_node("OneHotEncoder", [f"X{c}1cast"], [f"X{c}1out"], domain=ML,
                                   cats_int64s=list(range(cats)), zeros=0)]
        parts.append(f"X{c}1out")
    width = columns * cats
    inits.append(("shape_tensor", np.array([-1, width], np.int64)))
    nodes += [helper.make_node("Concat", parts, ["concat_result"], axis=-1),
              helper.make_node("Reshape", ["concat_result", "shape_tensor"], ["variable1"]),
              helper.make_node("LinearRegressor", ["variable1"], ["variable"], domain=ML,
                               coefficients=rng.standard_normal(width).tolist(),
                               intercepts=[float(rng.standard_normal())])]
    return model(nodes, I64, columns,
                 [("variable", helper.make_tensor_type_proto(F, [None, 1]))], inits)


CASES = {
    "logreg_binary_int": lambda rng: logistic_regression(rng, 4, [0, 1]),
    "logreg_binary_str": lambda rng: logistic_regression(rng, 4, ["neg", "pos"]),
    "logreg_multi_int": lambda rng: logistic_regression(rng, 5, [3, 5, 9]),
    "logreg_multi_str": lambda rng: logistic_regression(rng, 4, ["cat", "dog", "eel"]),
    "scaler_logreg": lambda rng: logistic_regression(rng, 6, [0, 1, 2], scaler=True),
    "scaler_logreg_binary_str": lambda rng: logistic_regression(rng, 6, ["a", "b"], True),
    "svc_ovr_int": lambda rng: svc(rng, 4, [0, 1, 2], proba=False),
    "svc_ovr_4": lambda rng: svc(rng, 3, [1, 2, 3, 4], proba=False),
    "svc_binary": lambda rng: svc(rng, 4, [0, 1], proba=False),
    "svc_proba_str": lambda rng: svc(rng, 4, ["cat", "dog", "eel"], proba=True),
    "svr": lambda rng: svr(rng, 4),
    "onehot_linreg": lambda rng: one_hot_linear(rng, 2, 4),
}


def check_against_ort(m, x, run=None):
    """onnxjit's outputs (or run(x)'s) equal onnxruntime's."""
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"X": x})
    got = run(x) if run else onnxjit.backend.prepare(m).run([x])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):         # ZipMap: one {label: probability} per row
            assert isinstance(g, list) and len(g) == len(w)
            for gr, wr in zip(g, w):
                assert list(gr) == list(wr)
                assert all(type(k) is type(kw) for k, kw in zip(gr, wr))
                np.testing.assert_allclose(list(gr.values()), list(wr.values()),
                                           rtol=1e-4, atol=1e-6)
        elif w.dtype == object:         # string labels
            assert g.dtype == object and g.tolist() == w.tolist()
        else:
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return got


@pytest.mark.parametrize("name", sorted(CASES))
def test_converted_sklearn_model_matches_onnxruntime(name):
    rng = np.random.default_rng(sorted(CASES).index(name))
    m = CASES[name](rng)
    f = m.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    if m.graph.input[0].type.tensor_type.elem_type == I64:
        x = rng.integers(0, 4, (20, f)).astype(np.int64)
    else:
        x = rng.standard_normal((20, f)).astype(np.float32)
    check_against_ort(m, x)
    check_against_ort(m, x[:1])          # one row: a second signature


@pytest.mark.parametrize("name", sorted(CASES))
def test_first_answers_of_the_reference_tier_match_onnxruntime(name):
    """With tiers on, onnx's evaluator answers while the compiled code builds: its ML ops
    are completed and mended (ops/ml.reference_ops) to give ORT's answers too."""
    from onnxjit.tiers import reference_runner
    rng = np.random.default_rng(sorted(CASES).index(name))
    m = CASES[name](rng)
    f = m.graph.input[0].type.tensor_type.shape.dim[1].dim_value
    if m.graph.input[0].type.tensor_type.elem_type == I64:
        x = rng.integers(0, 4, (20, f)).astype(np.int64)
    else:
        x = rng.standard_normal((20, f)).astype(np.float32)
    check_against_ort(m, x, reference_runner(m))


def test_zipmap_rows_are_plain_python():
    """The dicts hold Python ints / strs and floats, as ORT returns them."""
    rng = np.random.default_rng(0)
    got = onnxjit.backend.prepare(CASES["logreg_multi_str"](rng)).run(
        [rng.standard_normal((3, 4)).astype(np.float32)])
    label, probs = got
    assert [type(s) for s in label] == [str] * 3
    assert all(type(v) is float for row in probs for v in row.values())
    assert all(abs(sum(row.values()) - 1) < 1e-5 for row in probs)


def test_python_edge_names_are_the_zipmap_outputs_and_dict_inputs():
    from onnxjit.ops.ml import python_edge_names
    from test_ops_ml_linear import dict_vectorizer_model
    rng = np.random.default_rng(0)
    assert python_edge_names(CASES["logreg_multi_str"](rng).graph) == {"output_probability"}
    assert python_edge_names(CASES["svr"](rng).graph) == set()
    assert python_edge_names(dict_vectorizer_model(TensorProto.STRING, F, ["a"]).graph) == {"x"}
