"""ai.onnx.ml ops (tree ensembles: ml_trees.py). Numeric work is compiled (kernels/ml.py);
string tensors and maps, which Numba cannot hold, are converted at the graph's edges in Python:
a string input becomes int64 key codes before the compiled graph (LoweringContext.python_input),
string outputs and ZipMap's dicts are made from compiled index / score arrays after it
(LoweringContext.python_output)."""
from __future__ import annotations

from itertools import repeat

import numpy as np

from .. import scalar_expr as S
from .. import steps as E
from ..registry import register
from .indexing import Gather
from .movement import reshape

ML = "ai.onnx.ml"


@register("Binarizer", 1, domain=ML)
def Binarizer(ctx, x, threshold=0.0):
    """1 where x > threshold, else 0 (NaN gives 0), in x's type.  Integer inputs compare in
    float64, as numpy compares them with the float threshold."""
    if x.dtype.kind not in "fiu":
        ctx.fail(f"Binarizer of {x.dtype} is not supported (a numeric tensor expected)")
    t = ctx.scalar(threshold, x.dtype if x.dtype.kind == "f" else np.float64)
    one, zero = ctx.scalar(1, x.dtype), ctx.scalar(0, x.dtype)
    return ctx.elementwise(S.paren(S.cond(S.gt(S.operand(0), t), one, zero)), x, dtype=x.dtype)


@register("ArrayFeatureExtractor", 1, domain=ML)
def ArrayFeatureExtractor(ctx, x, y):
    """x[..., y.ravel()], shaped x.shape[:-1] + (y.size,) ((1, y.size) for a 1-D x): Gather
    along the last axis, with its bounds checks."""
    if y.dtype != np.int64:
        ctx.fail(f"ArrayFeatureExtractor indices must be int64, got {y.dtype}")
    if x.rank == 0:
        ctx.fail("ArrayFeatureExtractor of a scalar")
    z = Gather(ctx, x, reshape(ctx, y, (y.size,)), axis=-1)
    return reshape(ctx, z, (1, y.size) if x.rank == 1 else tuple(x.shape[:-1]) + (y.size,))


# -- shared helpers ---------------------------------------------------------------------------

POST = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}   # trees.py


def _post(ctx, post_transform):
    if post_transform not in POST:
        ctx.fail(f"post_transform={post_transform!r} is not one of {sorted(POST)}")
    return POST[post_transform]


def _rows(ctx, x):
    """x as [N, F] (a 1-D x is one row), numeric."""
    if x.dtype.kind not in "fiu" or x.rank not in (1, 2):
        ctx.fail(f"expects a 1-D or 2-D numeric input, got {x.dtype}{list(x.shape)}")
    return reshape(ctx, x, (1, x.size)) if x.rank == 1 else x


def _matrix(ctx, values, rows, name):
    """A float32 [rows, F] matrix from a flat attribute (F = its size / rows)."""
    a = np.asarray(values if values is not None else [], np.float32).ravel()
    if rows <= 0 or a.size == 0 or a.size % rows:
        ctx.fail(f"{name} has {a.size} values, not a multiple of {rows}")
    return a.reshape(rows, a.size // rows)


def _string_table(names):
    """Index array -> numpy object array of the strings (as ORT returns string tensors)."""
    table = np.array(list(names), dtype=object)
    return lambda index: table[index]


def _label_output(ctx, label, strings):
    """The label Value; with string labels it holds indices, mapped to the strings after the
    compiled graph."""
    return ctx.python_output(label, _string_table(strings)) if strings else label


# -- linear models ----------------------------------------------------------------------------

@register("LinearClassifier", 1, domain=ML)
def LinearClassifier(ctx, x, classlabels_ints=None, classlabels_strings=None,
                     coefficients=None, intercepts=None, multi_class=0, post_transform="NONE"):
    """(label [N], scores float32 [N, K]): one compiled kernel computing x . coef^T +
    intercepts (accumulated in float64 over x cast to float32, as ORT casts it), the label
    and ORT's post_transform; K = 2 for one coefficient row and two classes."""
    x = _rows(ctx, x)
    post = _post(ctx, post_transform)
    labels = list(classlabels_strings or classlabels_ints or [])
    if not labels:
        ctx.fail("classlabels_ints or classlabels_strings is required")
    t = len(intercepts) if intercepts else len(np.ravel(coefficients or [])) // x.shape[1]
    coef = _matrix(ctx, coefficients, max(t, 1), "coefficients")
    if coef.shape[1] != x.shape[1]:
        ctx.fail(f"coefficients are for {coef.shape[1]} features, the input has {x.shape[1]}")
    b = np.asarray(intercepts if intercepts else np.zeros(t), np.float64)
    strings = classlabels_strings
    if t == 1:
        if len(labels) != 2:
            ctx.fail(f"one row of coefficients (a binary classifier) needs 2 class labels, "
                     f"got {len(labels)}")
        ids = [0, 1] if strings else labels
    else:
        if len(labels) < t:
            ctx.fail(f"{t} score rows for {len(labels)} class labels")
        ids = list(range(len(labels))) if strings else labels
    add_second = int(t == 1)
    n, k = x.shape[0], 2 if add_second else t
    label, scores = ctx.kernel(
        ("ml", "linear_classifier"), x, ctx.constant(coef), ctx.constant(b),
        ctx.constant(np.asarray(ids, np.int64)), post, add_second,
        outs=[((n,), np.int64), ((n, k), np.float32)], meta={"kind": "linear_classifier"})
    return _label_output(ctx, label, strings), scores


@register("LinearRegressor", 1, domain=ML)
def LinearRegressor(ctx, x, coefficients=None, intercepts=None, post_transform="NONE",
                    targets=1):
    """float32 [N, targets] = x . coef^T + intercepts and ORT's post_transform, compiled."""
    x = _rows(ctx, x)
    post = _post(ctx, post_transform)
    coef = _matrix(ctx, coefficients, int(targets), "coefficients")
    if coef.shape[1] != x.shape[1]:
        ctx.fail(f"coefficients are for {coef.shape[1]} features, the input has {x.shape[1]}")
    b = np.asarray(intercepts if intercepts else np.zeros(targets), np.float64)
    if b.size != targets:
        ctx.fail(f"{b.size} intercepts for {targets} targets")
    return ctx.kernel(("ml", "linear_regressor"), x, ctx.constant(coef), ctx.constant(b), post,
                      shape=(x.shape[0], int(targets)), dtype=np.float32)


# -- SVMs -------------------------------------------------------------------------------------

KERNELS = {"LINEAR": 0, "POLY": 1, "RBF": 2, "SIGMOID": 3}


def _kernel(ctx, kernel_type, kernel_params, svc):
    if kernel_type not in KERNELS:
        ctx.fail(f"kernel_type={kernel_type!r} is not one of {sorted(KERNELS)}")
    gamma, coef0, degree = (list(kernel_params or []) + [0.0, 0.0, 0.0])[:3]
    # without support vectors (liblinear) ORT always takes the linear kernel
    kind = KERNELS[kernel_type] if svc else 0
    return (kind, E.scalar(gamma, np.float32), E.scalar(coef0, np.float32),
            E.scalar(degree, np.float32))


@register("SVMClassifier", 1, domain=ML)
def SVMClassifier(ctx, x, classlabels_ints=None, classlabels_strings=None, coefficients=None,
                  kernel_params=None, kernel_type="LINEAR", post_transform="NONE", prob_a=None,
                  prob_b=None, rho=None, support_vectors=None, vectors_per_class=None):
    """(label [N], scores float32 [N, K]) as ORT computes them: kernels against the support
    vectors, one-vs-one votes (and pairwise-coupled probabilities with prob_a/prob_b), or a
    liblinear model without support vectors; one compiled kernel per row block."""
    x = _rows(ctx, x)
    post = _post(ctx, post_transform)
    labels = list(classlabels_strings or classlabels_ints or [])
    nc = len(labels)
    if nc == 0:
        ctx.fail("classlabels_ints or classlabels_strings is required")
    if not rho:
        ctx.fail("rho is required")
    proba = np.asarray(prob_a or [], np.float32)
    probb = np.asarray(prob_b or [], np.float32)
    if proba.size != probb.size:
        ctx.fail("prob_a and prob_b must have the same size")
    counts = np.asarray(vectors_per_class or [], np.int64)
    nv = int(counts.sum())
    npairs = nc * (nc - 1) // 2
    if nv > 0:
        if counts.size != nc:
            ctx.fail(f"vectors_per_class has {counts.size} entries for {nc} classes")
        sv = _matrix(ctx, support_vectors, nv, "support_vectors")
        coef = np.asarray(coefficients or [], np.float32).ravel()
        if coef.size < (nc - 1) * nv:
            ctx.fail(f"{coef.size} coefficients for {nc} classes and {nv} support vectors")
        coef = coef[:(nc - 1) * nv].reshape(nc - 1, nv) if nc > 1 else coef.reshape(0, nv)
        if len(rho) < npairs or (proba.size and proba.size < npairs):
            ctx.fail(f"rho / prob_a / prob_b need one value per class pair ({npairs})")
        width = nc if proba.size else (npairs if nc > 2 else 2)
    else:
        sv = np.zeros((0, x.shape[1]), np.float32)
        coef = _matrix(ctx, coefficients, nc, "coefficients")
        width = nc
    if sv.shape[1] != x.shape[1] or (nv == 0 and coef.shape[1] != x.shape[1]):
        ctx.fail(f"the model is for {sv.shape[1] if nv else coef.shape[1]} features, the "
                 f"input has {x.shape[1]}")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if nv else counts
    ids = np.arange(nc, dtype=np.int64) if classlabels_strings else np.asarray(labels, np.int64)
    positive = int(bool((np.asarray(coefficients, np.float32) >= 0).all()))
    n = x.shape[0]
    tables = (sv, starts, counts, coef, np.asarray(rho, np.float32), proba, probb, ids)
    label, scores = ctx.kernel(
        ("ml", "svm_classifier"), x, *map(ctx.constant, tables),
        *_kernel(ctx, kernel_type, kernel_params, nv > 0), post, positive,
        outs=[((n,), np.int64), ((n, width), np.float32)], meta={"kind": "svm"})
    return _label_output(ctx, label, classlabels_strings), scores


@register("SVMRegressor", 1, domain=ML)
def SVMRegressor(ctx, x, coefficients=None, kernel_params=None, kernel_type="LINEAR",
                 n_supports=0, one_class=0, post_transform="NONE", rho=None,
                 support_vectors=None):
    """float32 [N, 1]: sum of coefficients times kernels against the support vectors + rho
    (liblinear without them), +-1 for one_class, compiled."""
    x = _rows(ctx, x)
    post = _post(ctx, post_transform)
    if not rho:
        ctx.fail("rho is required")
    coef = np.asarray(coefficients or [], np.float32).ravel()
    if n_supports > 0:
        sv = _matrix(ctx, support_vectors, int(n_supports), "support_vectors")
        if coef.size != n_supports:
            ctx.fail(f"{coef.size} coefficients for {n_supports} support vectors")
        features = sv.shape[1]
    else:
        sv = np.zeros((0, x.shape[1]), np.float32)
        features = coef.size
    if features != x.shape[1]:
        ctx.fail(f"the model is for {features} features, the input has {x.shape[1]}")
    return ctx.kernel(("ml", "svm_regressor"), x, ctx.constant(sv), ctx.constant(coef),
                      ctx.constant(np.asarray(rho, np.float32)),
                      *_kernel(ctx, kernel_type, kernel_params, n_supports > 0),
                      int(bool(one_class)), post, shape=(x.shape[0], 1), dtype=np.float32)


# -- feature transforms -----------------------------------------------------------------------

NORMS = {"MAX": 0, "L1": 1, "L2": 2}


@register("Normalizer", 1, domain=ML)
def Normalizer(ctx, x, norm="MAX"):
    """float32 rows divided by their MAX / L1 / L2 norm (compiled, one pass per row)."""
    if norm not in NORMS:
        ctx.fail(f"norm={norm!r} is not one of {sorted(NORMS)}")
    rows = _rows(ctx, x)
    z = ctx.kernel(("ml", "normalizer"), rows, NORMS[norm],
                   shape=rows.shape, dtype=np.float32)
    return reshape(ctx, z, x.shape)


def _per_feature(ctx, x, values, name):
    """A constant broadcasting along x's last axis: one value, or one per feature."""
    a = np.asarray(values, np.float32).ravel()
    width = x.shape[-1] if x.rank else 1
    if a.size not in (1, width):
        ctx.fail(f"{name} has {a.size} values for {width} features")
    return ctx.constant(a)


@register("Scaler", 1, domain=ML)
def Scaler(ctx, x, offset=None, scale=None):
    """float32 (x - offset) * scale, fused elementwise; offset/scale have one value or one
    per feature (last axis)."""
    if x.dtype.kind not in "fiu":
        ctx.fail(f"Scaler of {x.dtype} is not supported (a numeric tensor expected)")
    off = _per_feature(ctx, x, offset if offset else [0.0], "offset")
    sc = _per_feature(ctx, x, scale if scale else [1.0], "scale")
    v, o, s = S.operands(3)
    return ctx.elementwise(S.convert(np.float32, (v - o) * s), x, off, sc, dtype=np.float32)


@register("Imputer", 1, domain=ML)
def Imputer(ctx, x, imputed_value_floats=None, imputed_value_int64s=None,
            replaced_value_float=0.0, replaced_value_int64=0):
    """x with every replaced value (NaN matches NaN) swapped for the imputed value of its
    feature (last axis), fused elementwise."""
    if imputed_value_floats:
        if x.dtype.kind != "f":
            ctx.fail(f"imputed_value_floats for a {x.dtype} input")
        values, replaced = np.asarray(imputed_value_floats, x.dtype), float(replaced_value_float)
    elif imputed_value_int64s:
        if x.dtype.kind not in "iu":
            ctx.fail(f"imputed_value_int64s for a {x.dtype} input")
        values, replaced = np.asarray(imputed_value_int64s, x.dtype), int(replaced_value_int64)
    else:
        ctx.fail("imputed_value_floats or imputed_value_int64s is required")
    width = x.shape[-1] if x.rank else 1
    if values.size not in (1, width):
        ctx.fail(f"{values.size} imputed values for {width} features")
    v = ctx.constant(values)
    a, b = S.operands(2)
    if isinstance(replaced, float) and np.isnan(replaced):
        return ctx.elementwise(S.paren(S.cond(S.ne(a, a), b, a)), x, v, dtype=x.dtype)
    r = ctx.scalar(replaced, x.dtype)
    return ctx.elementwise(S.paren(S.cond(S.eq(a, r), b, a)), x, v, dtype=x.dtype)


@register("FeatureVectorizer", 1, domain=ML)
def FeatureVectorizer(ctx, *xs, inputdimensions=None):
    """float32 [N, sum(inputdimensions)]: each input as [N, C] (a 1-D one is one row, as ORT
    reads it) cast to float32, cut or padded with zeros to its dimension, concatenated."""
    from .movement import Concat, take_axis
    dims = list(inputdimensions or [])
    xs = [x for x in xs if x is not None]
    if len(dims) != len(xs):
        ctx.fail(f"{len(xs)} inputs for {len(dims)} inputdimensions")
    parts, n = [], None
    for x, d in zip(xs, dims):
        if x.dtype.kind not in "fiu" or x.rank not in (1, 2):
            ctx.fail(f"expects 1-D or 2-D numeric inputs, got {x.dtype}{list(x.shape)}")
        x2 = reshape(ctx, x, (1, x.size)) if x.rank == 1 else x    # one row, as ORT reads it
        if n is not None and x2.shape[0] != n:
            ctx.fail("the inputs have different numbers of rows")
        n = x2.shape[0]
        f = ctx.elementwise(S.convert(np.float32, S.operand(0)), x2, dtype=np.float32)
        c = x2.shape[1]
        if c != d:
            f = take_axis(ctx, f, 1, [j if j < c else -1 for j in range(int(d))])
        parts.append(f)
    return Concat(ctx, *parts, axis=1)


# -- lookups: ZipMap, LabelEncoder, CategoryMapper, OneHotEncoder --------------------------------

@register("ZipMap", 1, domain=ML)
def ZipMap(ctx, x, classlabels_int64s=None, classlabels_strings=None):
    """A list of {label: probability} dicts, one per row, as ORT returns it: the scores are
    computed compiled, the dicts built in Python after the graph (Numba holds no maps)."""
    labels = list(classlabels_strings or classlabels_int64s or [])
    if not labels:
        ctx.fail("classlabels_int64s or classlabels_strings is required")
    if x.dtype != np.float32 or x.rank not in (1, 2):
        ctx.fail(f"expects float32 [N, classes] scores, got {x.dtype}{list(x.shape)}")
    if x.shape[-1] != len(labels):
        ctx.fail(f"{x.shape[-1]} scores per row for {len(labels)} labels")
    keys = [str(k) for k in labels] if classlabels_strings else [int(k) for k in labels]
    copy = ctx.elementwise(S.operand(0), x, dtype=x.dtype)   # a Value of its own, for the edge

    def to_maps(scores):
        # dict((k0, v0), (k1, v1), ...) per row, the pairs zipped column-wise in C (about 30%
        # faster than a dict(zip(keys, row)) comprehension)
        cols = scores.reshape(-1, len(keys)).T.tolist()
        return list(map(dict, zip(*(zip(repeat(k), c) for k, c in zip(keys, cols)))))
    return ctx.python_output(copy, to_maps)


def _key_codes(ctx, x, keys, what, nan_keys=False):
    """int64 codes shaped like x: the index of each element in `keys` (first match), -1 where
    it is none. String keys: computed in Python from the string input before the compiled
    graph; numeric keys: a compiled binary search over the sorted keys (a NaN key matches NaN
    with `nan_keys`, as LabelEncoder-4 specifies; before it ORT matches none)."""
    if len(keys) and isinstance(keys[0], str):
        if x.dtype != object:
            ctx.fail(f"{what} has string keys, the input is {x.dtype}")
        index = {}
        for i, k in enumerate(keys):
            index.setdefault(k, i)
        get = index.get

        def codes(strings):
            return np.fromiter((get(s, -1) for s in strings.ravel()), np.int64,
                               strings.size).reshape(strings.shape)
        return ctx.python_input(x, codes, x.shape, np.int64)
    if x.dtype.kind not in "fiu":
        ctx.fail(f"{what} has numeric keys, the input is {x.dtype}")
    k = np.asarray(keys).astype(x.dtype)
    nan_index = -1
    if nan_keys and k.dtype.kind == "f" and np.isnan(k).any():
        nan_index = int(np.flatnonzero(np.isnan(k))[0])
    order = np.argsort(k, kind="stable")
    sk = k[order]
    # keep the first of equal keys: searchsorted finds the leftmost, stable order keeps index order
    return ctx.kernel(("ml", "sorted_lookup"), x, ctx.constant(sk),
                      ctx.constant(order.astype(np.int64)), nan_index, -1,
                      shape=x.shape, dtype=np.int64)


def _map_values(ctx, codes, values, default, dtype):
    """The mapped output from key codes: numeric values compiled (default where -1); string
    values as an index into [values..., default], turned into strings after the graph."""
    if dtype == object:
        table = list(values) + [default]
        c = S.operand(0)
        out = ctx.elementwise(S.paren(S.cond(S.ge(c, ctx.lit(0)), c, ctx.lit(len(values)))),
                              codes, dtype=np.int64)
        return ctx.python_output(out, _string_table(table))
    vals = np.asarray(values, dtype).ravel()
    return ctx.kernel(("ml", "take_default"), codes, ctx.constant(vals),
                      ctx.constant(np.asarray([default], dtype)),
                      ctx.constant(np.zeros(0, dtype)), shape=codes.shape, dtype=dtype)


def _tensor_list(t):
    if t is None:
        return None
    a = np.asarray(t)
    if a.dtype.kind in "SUO":
        return [s.decode() if isinstance(s, bytes) else str(s) for s in a.ravel()]
    return a.ravel()


@register("LabelEncoder", 1, domain=ML)
def LabelEncoder(ctx, x, classes_strings=None, default_int64=-1, default_string="_Unused",
                 default_float=-0.0, keys_floats=None, keys_int64s=None, keys_strings=None,
                 values_floats=None, values_int64s=None, values_strings=None, keys_tensor=None,
                 values_tensor=None, default_tensor=None):
    """Maps keys to values (int64, float, double, int16... or strings, either side): numeric
    lookups compiled (a binary search over the sorted keys); string keys are looked up in
    Python before the compiled graph, string values made after it (Numba holds no string
    tensors). Opset 1: string <-> int64 through the classes_strings index."""
    if ctx.opset < 2:
        classes = list(classes_strings or [])
        if x.dtype == object:
            return _map_values(ctx, _key_codes(ctx, x, classes, "LabelEncoder"),
                               np.arange(len(classes)), default_int64, np.int64)
        if x.dtype != np.int64:
            ctx.fail(f"expects string or int64 input, got {x.dtype}")
        idx = np.arange(len(classes), dtype=np.int64)
        return _map_values(ctx, _key_codes(ctx, x, list(idx), "LabelEncoder"), classes,
                           default_string, object)
    keys = next((k for k in (_tensor_list(keys_tensor), keys_strings, keys_int64s, keys_floats)
                 if k is not None and len(k)), None)
    if keys is None:
        ctx.fail("no keys (keys_strings, keys_int64s, keys_floats or keys_tensor)")
    if values_tensor is not None:
        values = _tensor_list(values_tensor)
        vt = np.asarray(values_tensor)
        dtype = object if vt.dtype.kind in "SUO" else vt.dtype
    elif values_strings:
        values, dtype = values_strings, object
    elif values_int64s:
        values, dtype = values_int64s, np.dtype(np.int64)
    elif values_floats:
        values, dtype = values_floats, np.dtype(np.float32)
    else:
        ctx.fail("no values (values_strings, values_int64s, values_floats or values_tensor)")
    if len(values) != len(keys):
        ctx.fail(f"{len(keys)} keys for {len(values)} values")
    if default_tensor is not None:
        d = _tensor_list(default_tensor)
        default = d[0] if len(d) else None
    elif dtype == object:
        default = default_string
    elif dtype.kind == "f":
        default = default_float
    else:
        default = default_int64
    return _map_values(ctx, _key_codes(ctx, x, keys, "LabelEncoder", ctx.opset >= 4), values,
                       default, dtype)


@register("CategoryMapper", 1, domain=ML)
def CategoryMapper(ctx, x, cats_int64s=None, cats_strings=None, default_int64=-1,
                   default_string="_Unused"):
    """string -> int64 (the category's paired int) or int64 -> string, as LabelEncoder."""
    ints, strings = list(cats_int64s or []), list(cats_strings or [])
    if len(ints) != len(strings) or not ints:
        ctx.fail("cats_int64s and cats_strings must pair up")
    if x.dtype == object:
        return _map_values(ctx, _key_codes(ctx, x, strings, "CategoryMapper"), ints,
                           default_int64, np.dtype(np.int64))
    if x.dtype != np.int64:
        ctx.fail(f"expects string or int64 input, got {x.dtype}")
    return _map_values(ctx, _key_codes(ctx, x, ints, "CategoryMapper"), strings,
                       default_string, object)


@register("OneHotEncoder", 1, domain=ML)
def OneHotEncoder(ctx, x, cats_int64s=None, cats_strings=None, zeros=1):
    """float32 x.shape + [categories]: a one at each value's category; a value in none of
    them gives zeros (zeros=1) or an error (zeros=0). Numeric inputs are truncated to int64
    as ORT does; strings are looked up in Python before the compiled graph."""
    from .elementwise import _cast
    if cats_strings:
        cats = list(cats_strings)
        codes = _key_codes(ctx, x, cats, "OneHotEncoder")
    elif cats_int64s:
        cats = [int(c) for c in cats_int64s]
        if x.dtype.kind not in "fiu":
            ctx.fail(f"int64 categories for a {x.dtype} input")
        xi = _cast(ctx, x, np.int64) if x.dtype != np.int64 else x
        codes = _key_codes(ctx, xi, cats, "OneHotEncoder")
    else:
        ctx.fail("cats_int64s or cats_strings is required")
    k = len(cats)
    z = ctx.kernel(("ml", "one_hot_codes"), codes, k, int(bool(zeros)),
                   shape=(codes.size, k), dtype=np.float32)
    return reshape(ctx, z, tuple(x.shape) + (k,))


def reference_ops(model=None):
    """ZipMap and CategoryMapper for onnx's ReferenceEvaluator (it has neither), and its
    SVMClassifier, Normalizer and DictVectorizer mended to agree with ORT (onnx 1.23 couples
    pairwise SVM probabilities with a dot product where libsvm multiplies elements, divides by
    the largest magnitude for Normalizer MAX, gives a map a 1-D row in its values' numpy type):
    what the reference tier (tiers.py) runs while the compiled code builds."""
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.aionnxml import op_normalizer, op_svm_classifier

    from ..ir import tensor_dtype
    map_types = {vi.name: tensor_dtype(vi.type.map_type.value_type.tensor_type.elem_type)
                 for vi in (model.graph.input if model is not None else [])
                 if vi.type.HasField("map_type")}

    class DictVectorizer(OpRun):
        op_domain = ML

        def _run(self, x, int64_vocabulary=None, string_vocabulary=None):
            vocab = list(string_vocabulary or []) or list(int64_vocabulary or [])
            dtype = map_types.get(self.onnx_node.input[0]) or np.float32
            x = x[()] if isinstance(x, np.ndarray) else x    # the backend holds maps in 0-d arrays
            return (np.array([[x.get(k, 0) for k in vocab]], dtype),)

    class SVMClassifier(op_svm_classifier.SVMClassifier):
        op_domain = ML

        def _probabilities(self, scores, class_count_):
            k = class_count_
            r = np.zeros((k, k), np.float32)
            index = 0
            for i in range(k):
                for j in range(i + 1, k):
                    v = op_svm_classifier.sigmoid_probability(
                        scores[index], self._svm.atts.prob_a[index],
                        self._svm.atts.prob_b[index])
                    v = min(max(v, 1.0e-7), 1 - 1.0e-7)
                    r[i, j], r[j, i] = v, 1 - v
                    index += 1
            from ..kernels.ml import _multiclass_probability
            p = np.empty(k, np.float32)
            _multiclass_probability.py_func(k, r, p)
            return p

    class Normalizer(op_normalizer.Normalizer):
        op_domain = ML

        def _run(self, x, norm=None):
            if norm != "MAX":
                return super()._run(x, norm)
            rows = x.reshape(1, -1) if x.ndim == 1 else x
            div = rows.max(axis=1, keepdims=True).astype(np.float32)
            y = np.where(div != 0, rows / np.where(div != 0, div, 1), rows)
            return (y.astype(np.float32).reshape(x.shape),)

    class ZipMap(OpRun):
        op_domain = ML

        def _run(self, x, classlabels_int64s=None, classlabels_strings=None):
            keys = [str(k) for k in classlabels_strings] if classlabels_strings else \
                [int(k) for k in classlabels_int64s]
            return ([dict(zip(keys, row)) for row in
                     np.asarray(x, np.float32).reshape(-1, len(keys)).tolist()],)

    class CategoryMapper(OpRun):
        op_domain = ML

        def _run(self, x, cats_int64s=None, cats_strings=None, default_int64=None,
                 default_string=None):
            ints, strings = [int(i) for i in cats_int64s], [str(s) for s in cats_strings]
            if x.dtype == object or x.dtype.kind in "US":
                table = dict(zip(strings, ints))
                d = -1 if default_int64 is None else default_int64
                return (np.array([table.get(s, d) for s in x.ravel()],
                                 np.int64).reshape(x.shape),)
            table = dict(zip(ints, strings))
            d = "_Unused" if default_string is None else default_string
            return (np.array([table.get(int(v), d) for v in x.ravel()],
                             dtype=object).reshape(x.shape),)
    return [ZipMap, CategoryMapper, SVMClassifier, Normalizer, DictVectorizer]


@register("DictVectorizer", 1, domain=ML)
def DictVectorizer(ctx, x, int64_vocabulary=None, string_vocabulary=None):
    """A map input (a Python dict, as ORT takes it) as a dense [1, vocabulary] row in the
    map's value type: each vocabulary key's value, 0 where the map lacks it (keys outside
    the vocabulary are ignored, as ORT does). Built in Python before the compiled graph."""
    vocab = list(string_vocabulary or []) or [int(k) for k in int64_vocabulary or []]
    if not vocab:
        ctx.fail("string_vocabulary or int64_vocabulary is required")
    declared = ctx.program.input_types.get(x.name)
    if x.dtype != object or x.rank != 0 or declared is None or \
            not declared.HasField("map_type"):
        ctx.fail("the input must be a map graph input (a dict)")
    from ..ir import tensor_dtype
    dtype = tensor_dtype(declared.map_type.value_type.tensor_type.elem_type)
    if dtype is None or dtype.kind not in "fiu":
        ctx.fail("maps of strings are not supported (numeric values expected)")
    width = len(vocab)

    def dense(m):
        m = m[()]
        if not isinstance(m, dict):
            raise TypeError(f"DictVectorizer: expected a dict, got {type(m).__name__}")
        return np.array([[m.get(k, 0) for k in vocab]], dtype)
    return ctx.python_input(x, dense, (1, width), dtype, tag="dense")


def python_edge_names(graph):
    """Names of the graph's non-tensor inputs and outputs these lowerings handle in Python at
    the compiled graph's edges: ZipMap's sequence-of-maps outputs and DictVectorizer's map
    inputs (read by nothing else). A driver deciding which graphs need non-tensor handling of
    its own (sequences, optionals) should leave these to the compiled path."""
    made_by_zipmap = {o for n in graph.node if n.op_type == "ZipMap" and n.domain == ML
                      for o in n.output}
    readers = {}
    for n in graph.node:
        for name in n.input:
            readers.setdefault(name, []).append(n)
    outputs = {o.name for o in graph.output if o.name in made_by_zipmap}
    inputs = {i.name for i in graph.input if i.type.HasField("map_type") and readers.get(i.name)
              and all(r.op_type == "DictVectorizer" and r.domain == ML
                      for r in readers[i.name])}
    return outputs | inputs
