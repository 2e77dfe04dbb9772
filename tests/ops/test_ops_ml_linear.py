"""ai.onnx.ml linear models, SVMs, feature transforms and lookups (LinearClassifier,
LinearRegressor, SVMClassifier, SVMRegressor, Normalizer, Scaler, Imputer, FeatureVectorizer,
ZipMap, LabelEncoder, CategoryMapper, OneHotEncoder) against onnxruntime and onnx's
ReferenceEvaluator, on helper-built models."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxjit.backend
from helpers import NP_TO_ONNX

ML = "ai.onnx.ml"
STRING = TensorProto.STRING


def ml_model(nodes, inputs, outputs, ml_opset=3, opset=17):
    """A model of `nodes`; inputs {name: array}; outputs [name] (types left to inference)."""
    def info(name, a):
        t = STRING if a.dtype == object or a.dtype.kind in "US" else NP_TO_ONNX[a.dtype]
        return helper.make_tensor_value_info(name, t, a.shape)
    graph = helper.make_graph(nodes, "ml", [info(k, v) for k, v in inputs.items()],
                              [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    helper.make_opsetid(ML, ml_opset)])
    model.ir_version = 8
    return model


def node(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain=ML, **attrs)


def same(got, want, rtol=1e-5, atol=1e-6):
    """got equals want: arrays (strings exactly, floats to tolerance) or lists of dicts."""
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            assert list(g) == list(w)   # same keys, same order
            np.testing.assert_allclose(list(g.values()), list(w.values()), rtol=rtol, atol=atol)
        return
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == object or want.dtype.kind in "US":
        assert got.dtype == object
        assert got.tolist() == want.astype(object).tolist()
    else:
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def check(model, feeds, reference=False, rtol=1e-5, atol=1e-6):
    """onnxjit's outputs equal onnxruntime's (and the reference evaluator's)."""
    names = [i.name for i in model.graph.input]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, dict(zip(names, feeds)))
    got = onnxjit.backend.prepare(model).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        same(g, w, rtol, atol)
    if reference:
        from onnx.reference import ReferenceEvaluator
        for g, w in zip(got, ReferenceEvaluator(model).run(None, dict(zip(names, feeds)))):
            same(g, w, rtol, atol)
    return got


def rows(n, f, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal((n, f)).astype(dtype)


# -- LinearClassifier / LinearRegressor -------------------------------------------------------

@pytest.mark.parametrize("targets,labels,post", [
    (3, [0, 1, 2], "NONE"), (3, [4, 7, 9], "SOFTMAX"), (3, [0, 1, 2], "LOGISTIC"),
    (4, [1, 2, 3, 4], "SOFTMAX_ZERO"), (2, [0, 1], "LOGISTIC"), (2, [5, 6], "SOFTMAX"),
    (1, [0, 1], "NONE"), (1, [3, 8], "LOGISTIC"), (1, [0, 1], "SOFTMAX"),
    (3, ["a", "b", "c"], "SOFTMAX"), (1, ["no", "yes"], "LOGISTIC"),
    (3, [0, 1, 2], "PROBIT"),
])
def test_linear_classifier(targets, labels, post):
    rng = np.random.default_rng(targets)
    f = 6
    x = rows(9, f)
    coef = (rng.standard_normal(targets * f) * 0.3).tolist()
    attrs = dict(coefficients=coef, intercepts=rng.standard_normal(targets).tolist(),
                 post_transform=post)
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
    attrs[key] = labels
    if post == "PROBIT":   # probit of scores in (0, 1)
        x = np.abs(x) * 0.01
        attrs["coefficients"] = np.abs(coef).tolist()
        attrs["intercepts"] = [0.1, 0.5, 0.3]
    model = ml_model([node("LinearClassifier", ["x"], ["label", "scores"], **attrs)],
                     {"x": x}, ["label", "scores"], ml_opset=1)
    check(model, [x])


@pytest.mark.parametrize("n,f", [(23, 37), (4, 16), (9, 48)])
def test_linear_models_over_vector_widths(n, f):
    """Scores four rows at a time in 16-lane vectors: whole vectors, a ragged end of features
    and rows left over after the blocks of four, float32 and float64 inputs, against ORT."""
    rng = np.random.default_rng(n * f)
    coef = rng.standard_normal(3 * f).tolist()
    intercepts = rng.standard_normal(3).tolist()
    for dtype in (np.float32, np.float64):
        x = rows(n, f).astype(dtype)
        model = ml_model([node("LinearClassifier", ["x"], ["label", "scores"], coefficients=coef,
                               intercepts=intercepts, classlabels_ints=[0, 1, 2],
                               post_transform="NONE")], {"x": x}, ["label", "scores"],
                         ml_opset=1)
        check(model, [x], rtol=1e-5, atol=1e-5)
    x = rows(n, f)        # ORT's LinearRegressor takes float32 only
    model = ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=coef,
                           intercepts=intercepts, targets=3)], {"x": x}, ["y"])
    check(model, [x], rtol=1e-5, atol=1e-5)


def test_linear_classifier_binary_needs_two_labels():
    x = rows(2, 2)
    model = ml_model([node("LinearClassifier", ["x"], ["label", "scores"], coefficients=[1.0, 2.0],
                           intercepts=[0.0], classlabels_ints=[0, 1, 2])], {"x": x},
                     ["label", "scores"], ml_opset=1)
    with pytest.raises(Exception, match="2 class labels"):
        onnxjit.backend.prepare(model).run([x])


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_linear_classifier_input_types(dtype):
    x = (rows(7, 4) * 3).astype(dtype)
    attrs = dict(coefficients=list(np.linspace(-1, 1, 12)), intercepts=[0.5, -0.25, 0.0],
                 classlabels_ints=[0, 1, 2], post_transform="SOFTMAX")
    model = ml_model([node("LinearClassifier", ["x"], ["label", "scores"], **attrs)],
                     {"x": x}, ["label", "scores"], ml_opset=1)
    check(model, [x])


@pytest.mark.parametrize("targets,post", [(1, "NONE"), (3, "NONE"), (2, "SOFTMAX"),
                                          (3, "LOGISTIC"), (3, "SOFTMAX_ZERO")])
def test_linear_regressor(targets, post):
    rng = np.random.default_rng(1)
    x = rows(8, 5)
    attrs = dict(coefficients=rng.standard_normal(5 * targets).tolist(),
                 intercepts=rng.standard_normal(targets).tolist(), targets=targets,
                 post_transform=post)
    model = ml_model([node("LinearRegressor", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check(model, [x], reference=post == "NONE")


def test_linear_regressor_one_row_and_wrong_width():
    x = rows(1, 3)[0]
    model = ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=[1.0, 2.0, 3.0],
                           intercepts=[0.5])], {"x": x}, ["y"])
    check(model, [x])
    bad = ml_model([node("LinearRegressor", ["x"], ["y"], coefficients=[1.0, 2.0],
                         intercepts=[0.5])], {"x": rows(2, 3)}, ["y"])
    with pytest.raises(Exception, match="features"):
        onnxjit.backend.prepare(bad).run([rows(2, 3)])


# -- SVMs -------------------------------------------------------------------------------------

def svm_attrs(rng, classes, f, kernel, proba=False, labels=None):
    per = rng.integers(2, 5, classes)
    nv = int(per.sum())
    npairs = classes * (classes - 1) // 2
    attrs = dict(vectors_per_class=per.tolist(),
                 support_vectors=rng.standard_normal(nv * f).astype(np.float32).tolist(),
                 coefficients=(rng.standard_normal((classes - 1) * nv)).tolist(),
                 rho=rng.standard_normal(npairs).tolist(), kernel_type=kernel,
                 kernel_params=[0.3, 0.5, 3.0])
    attrs["classlabels_strings" if labels == "str" else "classlabels_ints"] = (
        [f"c{i}" for i in range(classes)] if labels == "str" else list(range(10, 10 + classes)))
    if proba:
        attrs["prob_a"] = (-rng.random(npairs) * 3).tolist()
        attrs["prob_b"] = (rng.standard_normal(npairs) * 0.1).tolist()
    return attrs


@pytest.mark.parametrize("classes,kernel,proba,labels,post", [
    (3, "RBF", False, None, "NONE"), (3, "RBF", True, "str", "NONE"),
    (2, "RBF", False, None, "NONE"), (2, "LINEAR", False, "str", "NONE"),
    (2, "POLY", True, None, "NONE"), (4, "SIGMOID", False, None, "NONE"),
    (4, "POLY", True, None, "NONE"), (2, "RBF", False, None, "LOGISTIC"),
    (3, "LINEAR", False, None, "SOFTMAX"),
])
def test_svm_classifier(classes, kernel, proba, labels, post):
    rng = np.random.default_rng(classes * 7 + len(kernel))
    f = 4
    attrs = svm_attrs(rng, classes, f, kernel, proba, labels)
    attrs["post_transform"] = post
    x = rows(11, f, seed=3)
    model = ml_model([node("SVMClassifier", ["x"], ["label", "scores"], **attrs)],
                     {"x": x}, ["label", "scores"], ml_opset=1)
    check(model, [x], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("classes", [2, 3])
def test_svm_classifier_liblinear(classes):
    rng = np.random.default_rng(5)
    x = rows(6, 3)
    attrs = dict(coefficients=rng.standard_normal(classes * 3).tolist(), rho=[0.2],
                 classlabels_ints=list(range(classes)), kernel_type="LINEAR",
                 kernel_params=[0.1, 0.0, 1.0])
    model = ml_model([node("SVMClassifier", ["x"], ["label", "scores"], **attrs)],
                     {"x": x}, ["label", "scores"], ml_opset=1)
    check(model, [x])


@pytest.mark.parametrize("kernel,one_class,n_supports", [
    ("RBF", 0, 5), ("LINEAR", 0, 4), ("POLY", 0, 3), ("SIGMOID", 1, 6), ("LINEAR", 0, 0)])
def test_svm_regressor(kernel, one_class, n_supports):
    rng = np.random.default_rng(n_supports)
    f = 4
    attrs = dict(coefficients=rng.standard_normal(n_supports or f).tolist(), rho=[0.3],
                 kernel_type=kernel, kernel_params=[0.2, 0.1, 2.0], one_class=one_class,
                 n_supports=n_supports)
    if n_supports:
        attrs["support_vectors"] = rng.standard_normal(n_supports * f).tolist()
    x = rows(10, f)
    model = ml_model([node("SVMRegressor", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check(model, [x], rtol=1e-4, atol=1e-5)


# -- feature transforms -----------------------------------------------------------------------

@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_normalizer(norm, dtype):
    x = (rows(6, 5) * 4).astype(dtype)
    model = ml_model([node("Normalizer", ["x"], ["y"], norm=norm)], {"x": x}, ["y"])
    # onnx's reference keeps float64 (the spec says float) and divides by the largest magnitude
    # for MAX (ORT by the largest value)
    check(model, [x], reference=dtype == np.float32 and norm != "MAX")


@pytest.mark.parametrize("dtype,offset,scale", [
    (np.float32, [0.5], [2.0]), (np.float32, [0.1, 0.2, 0.3, 0.4], [1, 2, 3, 4]),
    (np.float64, [1.0, -1.0, 0.0, 2.0], [0.5, 1, 2, 3]), (np.int64, [1.0], [0.25])])
def test_scaler(dtype, offset, scale):
    x = (rows(5, 4) * 10).astype(dtype)
    model = ml_model([node("Scaler", ["x"], ["y"], offset=offset, scale=[float(s) for s in scale])],
                     {"x": x}, ["y"])
    check(model, [x])


@pytest.mark.parametrize("dtype,imputed,replaced", [
    (np.float32, [9.0], float("nan")), (np.float32, [1.0, 2.0, 3.0], 0.0),
    (np.int64, [7], 0), (np.int64, [5, 6, 7], -1)])
def test_imputer(dtype, imputed, replaced):
    rng = np.random.default_rng(2)
    x = rng.integers(-1, 3, (6, 3)).astype(dtype)
    if dtype == np.float32:
        x[x == 2] = np.nan
        attrs = dict(imputed_value_floats=imputed, replaced_value_float=replaced)
    else:
        attrs = dict(imputed_value_int64s=imputed, replaced_value_int64=replaced)
    model = ml_model([node("Imputer", ["x"], ["y"], **attrs)], {"x": x}, ["y"])
    check(model, [x], reference=True)


def test_feature_vectorizer():
    a, b, c = rows(4, 3), np.arange(4, dtype=np.float32).reshape(4, 1), rows(4, 2, seed=1)
    model = ml_model([node("FeatureVectorizer", ["a", "b", "c"], ["y"],
                           inputdimensions=[2, 1, 4])], {"a": a, "b": b, "c": c}, ["y"])
    check(model, [a, b, c], reference=True)


def test_binarizer_and_scaler_chain():
    x = rows(4, 3)
    model = ml_model([node("Scaler", ["x"], ["s"], offset=[0.5], scale=[2.0]),
                      node("Binarizer", ["s"], ["y"], threshold=0.2)], {"x": x}, ["y"])
    check(model, [x], reference=True)


# -- lookups ----------------------------------------------------------------------------------

@pytest.mark.parametrize("labels", [[0, 1, 2], ["a", "bb", "c"]])
def test_zipmap(labels):
    x = np.abs(rows(5, 3))
    key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
    model = ml_model([node("ZipMap", ["x"], ["y"], **{key: labels})], {"x": x}, ["y"],
                     ml_opset=1)
    got = check(model, [x])
    assert isinstance(got[0], list) and type(next(iter(got[0][0]))) is type(labels[0])


def test_zipmap_of_a_graph_output_keeps_the_tensor():
    x = rows(3, 2)
    model = ml_model([node("Normalizer", ["x"], ["p"], norm="L1"),
                      node("ZipMap", ["p"], ["y"], classlabels_int64s=[3, 4])], {"x": x},
                     ["p", "y"], ml_opset=1)
    check(model, [x])


def label_encoder(x, ml_opset=2, **attrs):
    return ml_model([node("LabelEncoder", ["x"], ["y"], **attrs)], {"x": x}, ["y"],
                    ml_opset=ml_opset)


S = np.array([["a", "b", "zz"], ["c", "a", ""]], dtype=object)


@pytest.mark.parametrize("x,attrs", [
    (S, dict(keys_strings=["a", "b", "c"], values_int64s=[1, 2, 3], default_int64=-7)),
    (S, dict(keys_strings=["a", "b", "c"], values_floats=[0.5, 1.5, 2.5])),
    (S, dict(keys_strings=["a", "b", "c"], values_strings=["x", "y", "z"],
             default_string="?")),
    (np.array([1, 5, 3, 9, 5], np.int64), dict(keys_int64s=[5, 3, 1], values_strings=["five", "three", "one"])),
    (np.array([1, 5, 3, 9, 5], np.int64), dict(keys_int64s=[5, 3, 1], values_int64s=[50, 30, 10])),
    (np.array([[0.5, np.nan], [2.0, 7.0]], np.float32),
     dict(keys_floats=[2.0, 0.5, float("nan")], values_int64s=[2, 1, 99])),
    (np.array([0.5, 2.0, 3.0], np.float32), dict(keys_floats=[2.0, 0.5], values_floats=[20.0, 5.0])),
])
def test_label_encoder(x, attrs):
    # onnx's reference maps a NaN key (a dict lookup), ORT before opset 4 does not
    check(label_encoder(x, **attrs), [x], reference=not np.isnan(np.asarray(
        attrs.get("keys_floats", [0.0]))).any())


def test_label_encoder_opset4_nan_key():
    x = np.array([[0.5, np.nan], [2.0, 7.0]], np.float32)
    keys = helper.make_tensor("k", TensorProto.FLOAT, (3,), [2.0, 0.5, float("nan")])
    model = label_encoder(x, ml_opset=4, keys_tensor=keys, values_int64s=[2, 1, 99],
                          default_int64=-1)
    check(model, [x])


def test_label_encoder_opset4_tensors_and_unicode_input():
    x = np.array(["a", "b", "d", "c"])     # a numpy unicode array, as users pass strings
    attrs = dict(keys_tensor=helper.make_tensor("k", STRING, (3,), [b"a", b"b", b"c"]),
                 values_tensor=helper.make_tensor("v", TensorProto.INT16, (3,), [0, 1, 2]),
                 default_tensor=helper.make_tensor("d", TensorProto.INT16, (1,), [42]))
    model = label_encoder(x.astype(object), ml_opset=4, **attrs)
    check(model, [x.astype(object)], reference=True)
    got = onnxjit.backend.prepare(model).run([x])
    np.testing.assert_array_equal(got[0], np.array([0, 1, 42, 2], np.int16))


def test_label_encoder_opset1():
    s = np.array(["b", "a", "q"], dtype=object)
    check(label_encoder(s, ml_opset=1, classes_strings=["a", "b"], default_int64=-5), [s])
    i = np.array([1, 0, 4], np.int64)
    check(label_encoder(i, ml_opset=1, classes_strings=["a", "b"], default_string="?"), [i])


def test_string_input_read_by_a_numeric_op_is_refused():
    x = np.array(["a"], dtype=object)
    model = ml_model([helper.make_node("Identity", ["x"], ["y"])], {"x": x}, ["y"])
    with pytest.raises(Exception, match="string"):
        onnxjit.backend.prepare(model).run([x])


@pytest.mark.parametrize("x", [np.array([["cat", "dog"], ["eel", "cat"]], dtype=object),
                               np.array([1, 2, 7, 3], np.int64)])
def test_category_mapper(x):
    model = ml_model([node("CategoryMapper", ["x"], ["y"], cats_strings=["cat", "dog", "cow"],
                           cats_int64s=[1, 2, 3], default_int64=-9, default_string="none")],
                     {"x": x}, ["y"], ml_opset=1)
    check(model, [x])   # onnx's reference has no CategoryMapper


@pytest.mark.parametrize("x,attrs", [
    (np.array([[1, 3], [0, 2]], np.int64), dict(cats_int64s=[0, 1, 2, 3], zeros=1)),
    (np.array([[1, 5], [0, 2]], np.int64), dict(cats_int64s=[2, 1, 0], zeros=1)),
    (np.array([1.0, 2.7, 0.0], np.float32), dict(cats_int64s=[0, 1, 2], zeros=1)),
    (np.array([["a", "c"], ["b", "q"]], dtype=object), dict(cats_strings=["a", "b", "c"])),
])
def test_one_hot_encoder(x, attrs):
    model = ml_model([node("OneHotEncoder", ["x"], ["y"], **attrs)], {"x": x}, ["y"],
                     ml_opset=1)
    check(model, [x])


def test_one_hot_encoder_unknown_category_with_zeros_0_is_an_error():
    x = np.array([1, 5], np.int64)
    model = ml_model([node("OneHotEncoder", ["x"], ["y"], cats_int64s=[1, 2], zeros=0)],
                     {"x": x}, ["y"], ml_opset=1)
    with pytest.raises(Exception, match="categor"):
        onnxjit.backend.prepare(model).run([x])


def dict_vectorizer_model(key_type, value_type, vocab, then=None):
    mt = helper.make_map_type_proto(key_type, helper.make_tensor_type_proto(value_type, []))
    voc = dict(string_vocabulary=vocab) if key_type == STRING else dict(int64_vocabulary=vocab)
    nodes = [node("DictVectorizer", ["x"], ["v" if then else "y"], **voc)] + ([then] if then else [])
    graph = helper.make_graph(nodes, "g", [helper.make_value_info("x", mt)],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("key_type,vocab,feed", [
    (STRING, ["a", "b", "c"], {"b": 2.0, "a": 1.5, "zz": 9.0}),
    (TensorProto.INT64, [1, 2, 3], {3: 2.0, 1: 1.5}),
])
def test_dict_vectorizer(key_type, vocab, feed):
    """Against onnxruntime (whose Python API builds maps of floats only)."""
    model = dict_vectorizer_model(key_type, TensorProto.FLOAT, vocab)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    same(onnxjit.backend.prepare(model).run([feed])[0], sess.run(None, {"x": feed})[0])


@pytest.mark.parametrize("value_type,dtype", [(TensorProto.DOUBLE, np.float64),
                                              (TensorProto.INT64, np.int64)])
def test_dict_vectorizer_value_types(value_type, dtype):
    """Other value types against onnx's reference (a 1-D row there; ORT's shape is [1, V])."""
    from onnx.reference import ReferenceEvaluator
    model = dict_vectorizer_model(STRING, value_type, ["a", "b", "c"])
    feed = {"c": dtype(3), "a": dtype(-2)}
    got = onnxjit.backend.prepare(model).run([feed])[0]
    want = ReferenceEvaluator(model).run(None, {"x": feed})[0]
    assert got.dtype == dtype and got.shape == (1, 3)
    np.testing.assert_array_equal(got[0], want)


def test_dict_vectorizer_into_a_linear_regressor():
    """skl2onnx's DictVectorizer + LinearRegression: the dense row feeds compiled code."""
    lin = node("LinearRegressor", ["v"], ["y"], coefficients=[0.5, -1.0, 2.0], intercepts=[0.25])
    model = dict_vectorizer_model(STRING, TensorProto.FLOAT, ["a", "b", "c"], lin)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = onnxjit.backend.prepare(model)
    from onnxjit.tiers import reference_runner
    first = reference_runner(model)       # what answers first with tiers on
    for d in ({"a": 1.0, "c": 3.0}, {"b": -2.0}):
        want = sess.run(None, {"x": d})[0]
        same(rep.run({"x": d})[0], want)
        same(first(np.array(d))[0], want)


def test_hostile_names_and_strings_stay_out_of_generated_source():
    evil = "x'); import os  #\n"
    x = np.array(["')\nimport os", "b"], dtype=object)
    nodes = [node("LabelEncoder", [evil], ["y"], keys_strings=["')\nimport os", "b"],
                  values_strings=["__import__('os')", "\n"], default_string="d")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(evil, STRING, [2])],
                              [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, 2)])
    model.ir_version = 8
    rep = onnxjit.backend.prepare(model)
    assert rep.run([x])[0].tolist() == ["__import__('os')", "\n"]
    source = rep.source()
    compile(source, "generated", "exec")   # still one valid module
    for line in source.splitlines():       # the names reach comments only (escaped)
        code = line.split("#", 1)[0]
        assert "__import__" not in code and "import os" not in code
