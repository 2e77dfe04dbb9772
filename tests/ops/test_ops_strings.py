"""String ops (Python host nodes, onnxjit/ops/strings.py) and TfIdfVectorizer (compiled), checked
against onnx.reference.ReferenceEvaluator and, where it runs the op, onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend
from onnxjit import staged
from onnxjit.errors import OnnxJitError

S, I64, B = TensorProto.STRING, TensorProto.INT64, TensorProto.BOOL


def _model(op, feeds, outs, opset=20, **attrs):
    """A one-node model: feeds {name: array}, outs [(name, elem_type, rank)]."""
    ins = [helper.make_tensor_value_info(
        n, S if a.dtype == object else helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
        for n, a in feeds.items()]
    node = helper.make_node(op, list(feeds), [o[0] for o in outs], **attrs)
    graph = helper.make_graph([node], "g", ins, [
        helper.make_tensor_value_info(n, t, [None] * r) for n, t, r in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = min(model.ir_version, 10)
    return model


def _ort(model, feeds):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _check(model, feeds, with_ort=True, with_ref=True):
    got = onnxjit.backend.prepare(model).run(list(feeds.values()))
    oracles = [ReferenceEvaluator(model).run(None, feeds)] if with_ref else []
    if with_ort:
        oracles.append(_ort(model, feeds))
    for expected in oracles:
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            g, e = np.asarray(g), np.asarray(e)
            assert g.shape == e.shape
            if e.dtype.kind in "OUS":
                assert g.dtype == object
                assert g.tolist() == e.astype(object).tolist()
            else:
                assert g.dtype == e.dtype
                np.testing.assert_allclose(g, e, rtol=1e-6)
    return got


def _s(*values, shape=None):
    a = np.array(list(values), dtype=object)
    return a.reshape(shape) if shape is not None else a


WORDS = _s("monday", "tuesday", "Wednesday", "MONDAY", "thursday")


@pytest.mark.parametrize("x, attrs", [
    (WORDS, dict(case_change_action="LOWER", is_case_sensitive=1, stopwords=["monday"])),
    (WORDS, dict(case_change_action="UPPER", is_case_sensitive=0, stopwords=["Monday"])),
    (WORDS, dict(case_change_action="NONE", is_case_sensitive=1)),
    (WORDS.reshape(1, -1), dict(case_change_action="UPPER", stopwords=["monday", "tuesday"])),
    (_s("monday", "monday"), dict(case_change_action="LOWER", stopwords=["monday"])),
    (_s("a b", "C d", shape=(1, 2)), dict(case_change_action="UPPER")),
])
def test_string_normalizer(x, attrs):
    attrs = dict(attrs, locale="C")   # ORT builds a C++ locale: this machine may lack en_US
    model = _model("StringNormalizer", {"x": x}, [("y", S, x.ndim)], opset=10, **attrs)
    _check(model, {"x": x})


@pytest.mark.parametrize("x, attrs", [
    (_s("a,b,c", "d,,e", "f"), dict(delimiter=",")),
    (_s("hello  world", " x ", "one", shape=(3, 1)), dict()),
    (_s("a-b-c-d", "e", "f-g", "h-i-j", shape=(2, 2)), dict(delimiter="-", maxsplit=1)),
    (_s("a::b", "::"), dict(delimiter="::")),
    (np.empty((0,), object), dict(delimiter=",")),
])
def test_string_split(x, attrs):
    model = _model("StringSplit", {"x": x}, [("y", S, x.ndim + 1), ("z", I64, x.ndim)],
                   **attrs)
    _check(model, {"x": x})


def test_string_split_empty_string_with_delimiter():
    """"" split on "," is [""] (one piece) as Python and the onnx reference split it; ORT 1.x
    gives no piece, so the reference is the oracle here."""
    x = _s("", "a,b")
    model = _model("StringSplit", {"x": x}, [("y", S, 2), ("z", I64, 1)], delimiter=",")
    _check(model, {"x": x}, with_ort=False)


@pytest.mark.parametrize("x, y", [
    (_s("a", "bc", "é"), _s("1", "", "ü")),
    (_s("a", "b", "c", "d", shape=(2, 2)), _s("x", "y")),
    (np.array("p", dtype=object), np.array("q", dtype=object)),
    (_s("a", "b", shape=(2, 1)), _s("x", "y", "z", shape=(1, 3))),
])
def test_string_concat(x, y):
    model = _model("StringConcat", {"x": x, "y": y}, [("z", S, max(x.ndim, y.ndim))])
    _check(model, {"x": x, "y": y})


@pytest.mark.parametrize("x, pattern", [
    (_s("www.google.com", "www.facebook.com", "www.bbc.co.uk"), r"www\.[\w.-]+\.\bcom\b"),
    (_s("a@b.org", "bad@", "x@y.com", "", shape=(2, 2)), r"[\w.+-]+@[\w-]+\.(com|org)"),
    (_s(), r"x*"),
])
def test_regex_full_match(x, pattern):
    model = _model("RegexFullMatch", {"x": x}, [("y", B, x.ndim)], pattern=pattern)
    _check(model, {"x": x})


def test_regex_bad_pattern_is_a_clear_error():
    x = _s("a")
    model = _model("RegexFullMatch", {"x": x}, [("y", B, 1)], pattern="(unclosed")
    with pytest.raises(OnnxJitError, match="invalid regex pattern"):
        onnxjit.backend.prepare(model).run([x])


@pytest.mark.parametrize("x, y", [
    (_s("a", "b", "c"), _s("a", "x", "c")),
    (_s("a", "b", "c", "a", shape=(2, 2)), _s("a")),
])
def test_equal_strings(x, y):
    model = _model("Equal", {"x": x, "y": y}, [("z", B, max(x.ndim, y.ndim))], opset=19)
    _check(model, {"x": x, "y": y})


def test_string_ops_run_as_python_segments_and_chain():
    """Normalizer -> Split -> Equal: each a Python host node, counted as a Python segment."""
    x = _s("Hello World", "THE cat", "a b c")
    nodes = [helper.make_node("StringNormalizer", ["x"], ["n"], case_change_action="LOWER"),
             helper.make_node("StringSplit", ["n"], ["parts", "counts"]),
             helper.make_node("Equal", ["parts", "w"], ["eq"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", S, [None]),
                     helper.make_tensor_value_info("w", S, [])],
        [helper.make_tensor_value_info("eq", B, [None, None]),
         helper.make_tensor_value_info("counts", I64, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = min(model.ir_version, 10)
    staged.python_segments.clear()
    feeds = {"x": x, "w": np.array("the", dtype=object)}
    _check(model, feeds, with_ort=False)
    assert {op for op, _ in staged.python_segments} == {"StringNormalizer", "StringSplit",
                                                          "Equal"}


def test_string_op_rejects_numeric_input():
    x = np.array([1.0, 2.0], np.float32)
    node = helper.make_node("StringSplit", ["x"], ["y", "z"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", S, [2])],
                              [helper.make_tensor_value_info("y", S, [2, None]),
                               helper.make_tensor_value_info("z", I64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(OnnxJitError):
        onnxjit.backend.prepare(model).run([x])


# -- TfIdfVectorizer (compiled) ------------------------------------------------------------------
POOL = dict(ngram_counts=[0, 4, 8], ngram_indexes=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
            pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 3, 5, 9, 2])   # 4 unigrams, ... trigrams
ROWS = np.array([[1, 1, 3, 3, 3, 7, 5, 6, 7, 8, 6, 7],
                 [8, 7, 6, 5, 4, 3, 2, 2, 3, 5, 4, 9]], np.int32)


def _pool(n_gram_max):
    """POOL cut to unigrams and bigrams (n_gram_max 2) or all three sizes."""
    if n_gram_max == 2:
        return dict(ngram_counts=[0, 4], ngram_indexes=list(range(7)),
                    pool_int64s=POOL["pool_int64s"][:10])
    return dict(ngram_counts=[0, 4, 10], ngram_indexes=list(range(5)) + [8, 7, 6, 5],
                pool_int64s=POOL["pool_int64s"][:13])


@pytest.mark.parametrize("x", [ROWS, ROWS.astype(np.int64), ROWS[0], ROWS[1].astype(np.int64)])
@pytest.mark.parametrize("mode, weights", [("TF", None), ("IDF", None), ("TFIDF", None),
                                           ("IDF", "w"), ("TFIDF", "w")])
@pytest.mark.parametrize("grams, skip", [((1, 1), 0), ((1, 2), 0), ((2, 2), 3), ((1, 3), 5),
                                         ((2, 3), 1), ((3, 3), 0)])
def test_tfidf_vectorizer(x, mode, weights, grams, skip):
    pool = _pool(grams[1])
    attrs = dict(pool, mode=mode, min_gram_length=grams[0], max_gram_length=grams[1],
                 max_skip_count=skip)
    if weights:
        attrs["weights"] = [0.5 + 0.25 * i for i in range(len(pool["ngram_indexes"]))]
    model = _model("TfIdfVectorizer", {"x": x}, [("y", TensorProto.FLOAT, x.ndim)], opset=9,
                   **attrs)
    # the reference fails on IDF / TFIDF without weights (len(None)), and reads weight i as
    # column i's (the spec and ORT: the i-th n-gram's): ORT alone checks those
    identity = pool["ngram_indexes"] == list(range(len(pool["ngram_indexes"])))
    _check(model, {"x": x}, with_ref=(bool(weights) and identity) or mode == "TF")


@pytest.mark.parametrize("x", [
    _s("a", "b", "c", "a", "b", "x"),
    _s("b", "c", "q", "a", "b", "c", "c", "a", shape=(2, 4)),
])
def test_tfidf_vectorizer_strings(x):
    """A string pool: the input is turned into codes in Python, counting is compiled."""
    attrs = dict(mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=1,
                 ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3, 4],
                 pool_strings=["a", "b", "c", "a", "b", "b", "c"])
    model = _model("TfIdfVectorizer", {"x": x}, [("y", TensorProto.FLOAT, x.ndim)], opset=9,
                   **attrs)
    _check(model, {"x": x})


def test_tfidf_vectorizer_bad_attributes_are_clear_errors():
    x = ROWS
    model = _model("TfIdfVectorizer", {"x": x}, [("y", TensorProto.FLOAT, 2)], opset=9,
                   mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0,
                   ngram_counts=[0, 3], ngram_indexes=[0, 1, 2, 3], pool_int64s=[1, 2, 3, 4, 5, 6])
    with pytest.raises(OnnxJitError, match="ngram_counts"):
        onnxjit.backend.prepare(model).run([x])
