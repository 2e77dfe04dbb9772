"""Tree ensembles (ai.onnx.ml): TreeEnsembleRegressor, TreeEnsembleClassifier (opsets 1, 3) and
TreeEnsemble (opset 5), specialized on the forest: its nodes become flat weight arrays walked by
kernels/trees.py, and the scores are finalized exactly as ONNX Runtime does (its two-class
special cases included). String class labels come out of a Python step after the graph."""
from __future__ import annotations

import numpy as np

from ..errors import LoweringError
from ..registry import register
from . import ml_forest
from .ml_forest import AGGREGATES, POST_TRANSFORMS
from .movement import reshape

ML = "ai.onnx.ml"


def _rows(ctx, x):
    """x as [N, F] (a 1-D x is one row); integer inputs are compared as float64."""
    if x.dtype.kind not in "fiu" or x.rank not in (1, 2):
        ctx.fail(f"expects a 1-D or 2-D numeric input, got {x.dtype}{list(x.shape)}")
    return reshape(ctx, x, (1, x.size)) if x.rank == 1 else x


def _enum(ctx, table, name, value):
    if isinstance(value, (int, np.integer)):
        if value not in table.values():
            ctx.fail(f"{name}={value} is not one of {sorted(table.values())}")
        return int(value)
    if value not in table:
        ctx.fail(f"{name}={value!r} is not one of {sorted(table)}")
    return table[value]


def _forest(ctx, x, build, n_targets, agg):
    """(scores, has) Values of the forest `build()` makes, over the rows of x [N, F]."""
    try:
        flat = ml_forest.flatten(build(), x.shape[1], n_targets, agg, x.dtype)
    except LoweringError as exc:
        ctx.fail(str(exc))
    a = {k: ctx.constant(v) for k, v in flat.arrays.items()}
    names = ("roots", "depth", "feat", "thr", "kids", "mode", "mstart", "mvals", "wstart",
             "wtarget", "wvalue", "leafw")
    n = x.shape[0]
    scores, has = ctx.kernel(("trees", "forest"), x, *(a[k] for k in names), n_targets, agg,
                             int(flat.fast), int(flat.single),
                             outs=[((n, n_targets), np.float64), ((n, n_targets), np.uint8)],
                                 meta={"kind": "tree_ensemble"})
    return scores, has, flat.n_trees


def _regression(ctx, x, build, n_targets, agg, post, base, out_dtype):
    x = _rows(ctx, x)
    scores, has, n_trees = _forest(ctx, x, build, n_targets, agg)
    base = np.zeros(0) if base is None else base
    like = ctx.constant(np.zeros(0, out_dtype))
    return ctx.kernel(("trees", "regression_scores"), scores, has, n_trees, agg,
                      ctx.constant(base), post, like, shape=(x.shape[0], n_targets),
                      dtype=out_dtype)


def _given(attrs):
    return {k: v for k, v in attrs.items() if v is not None and k not in ("ctx", "x")}


def _floats(tensor, values):
    """A float list attribute or its *_as_tensor twin, as a float64 vector."""
    v = tensor if tensor is not None else values if values is not None else []
    return np.asarray(v, np.float64).ravel()


@register("TreeEnsembleRegressor", 1, domain=ML)
def TreeEnsembleRegressor(ctx, x, aggregate_function="SUM", base_values=None,
                          base_values_as_tensor=None, n_targets=None, nodes_falsenodeids=None,
                          nodes_featureids=None, nodes_hitrates=None,
                          nodes_hitrates_as_tensor=None, nodes_missing_value_tracks_true=None,
                          nodes_modes=None, nodes_nodeids=None, nodes_treeids=None,
                          nodes_truenodeids=None, nodes_values=None, nodes_values_as_tensor=None,
                          post_transform="NONE", target_ids=None, target_nodeids=None,
                          target_treeids=None, target_weights=None,
                          target_weights_as_tensor=None):
    """Float32 [N, n_targets] scores of the trees (opset 3 adds the *_as_tensor spellings)."""
    attrs = _given(locals())
    if n_targets is None:
        ctx.fail("n_targets is required")
    agg = _enum(ctx, AGGREGATES, "aggregate_function", aggregate_function)
    post = _enum(ctx, POST_TRANSFORMS, "post_transform", post_transform)
    return _regression(ctx, x, lambda: ml_forest.from_classic(attrs, "target", n_targets),
                       n_targets, agg, post, _floats(base_values_as_tensor, base_values),
                       np.float32)


@register("TreeEnsemble", 5, domain=ML)
def TreeEnsemble(ctx, x, aggregate_function=1, leaf_targetids=None, leaf_weights=None,
                 membership_values=None, n_targets=None, nodes_falseleafs=None,
                 nodes_falsenodeids=None, nodes_featureids=None, nodes_hitrates=None,
                 nodes_missing_value_tracks_true=None, nodes_modes=None, nodes_splits=None,
                 nodes_trueleafs=None, nodes_truenodeids=None, post_transform=0, tree_roots=None):
    """Scores [N, n_targets] in x's type; nodes may test set membership (BRANCH_MEMBER)."""
    attrs = _given(locals())
    if x.dtype not in (np.float32, np.float64):
        ctx.fail(f"TreeEnsemble of {x.dtype} is not supported (float or double expected)")
    if n_targets is None:
        ctx.fail("n_targets is required")
    agg = _enum(ctx, AGGREGATES, "aggregate_function", aggregate_function)
    post = _enum(ctx, POST_TRANSFORMS, "post_transform", post_transform)
    return _regression(ctx, x, lambda: ml_forest.from_v5(attrs, n_targets), n_targets, agg,
                       post, None, x.dtype)


@register("TreeEnsembleClassifier", 1, domain=ML)
def TreeEnsembleClassifier(ctx, x, base_values=None, base_values_as_tensor=None,
                           class_ids=None, class_nodeids=None, class_treeids=None,
                           class_weights=None, class_weights_as_tensor=None,
                           classlabels_int64s=None, classlabels_strings=None,
                           nodes_falsenodeids=None, nodes_featureids=None, nodes_hitrates=None,
                           nodes_hitrates_as_tensor=None, nodes_missing_value_tracks_true=None,
                           nodes_modes=None, nodes_nodeids=None, nodes_treeids=None,
                           nodes_truenodeids=None, nodes_values=None,
                           nodes_values_as_tensor=None, post_transform="NONE"):
    """(label [N], probabilities float32 [N, classes]); string labels are picked after the
    compiled graph from the class index it computes."""
    attrs = _given(locals())
    labels = classlabels_strings if classlabels_strings else classlabels_int64s
    if not labels:
        ctx.fail("classlabels_int64s or classlabels_strings is required")
    k = len(labels)
    post = _enum(ctx, POST_TRANSFORMS, "post_transform", post_transform)
    x = _rows(ctx, x)
    weights = _floats(class_weights_as_tensor, class_weights)
    base = _floats(base_values_as_tensor, base_values)
    if base.size > k:
        ctx.fail(f"{base.size} base_values for {k} classes")
    scores, has, _ = _forest(ctx, x, lambda: ml_forest.from_classic(attrs, "class", k), k,
                             AGGREGATES["SUM"])
    binary = k == 2 and len(set(class_ids or [])) == 1
    positive = bool((weights >= 0).all())
    ids = np.arange(k, dtype=np.int64) if classlabels_strings else np.asarray(labels, np.int64)
    n = x.shape[0]
    label, probs = ctx.kernel(("trees", "classifier_scores"), scores, has, ctx.constant(base),
                              post, ctx.constant(ids), int(binary), int(positive),
                              outs=[((n,), np.int64), ((n, k), np.float32)])
    if classlabels_strings:
        label = ctx.python_output(label, string_labels(classlabels_strings))
    return label, probs


def string_labels(names):
    """Class index array -> numpy array of the label strings (object dtype, as ORT returns)."""
    table = np.array(list(names), dtype=object)
    return lambda index: table[index]
