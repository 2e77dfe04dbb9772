"""A tree ensemble's nodes, read from any of the three ONNX spellings, flattened into the arrays
kernels/trees.py walks (its docstring describes them). Built once, at compile time."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import LoweringError

MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3, "BRANCH_EQ": 4,
         "BRANCH_NEQ": 5, "BRANCH_MEMBER": 6, "LEAF": 7}
LEAF = 7
AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
POST_TRANSFORMS = {"NONE": 0, "SOFTMAX": 1, "LOGISTIC": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}


@dataclass
class Trees:
    """Nodes by global index: feature, mode (MODES), threshold, true/false child (global
    indices, -1 for a leaf), NaN-goes-true flag, member set; leaf weights; tree roots."""
    feature: list = field(default_factory=list)
    mode: list = field(default_factory=list)
    value: list = field(default_factory=list)
    true: list = field(default_factory=list)
    false: list = field(default_factory=list)
    nan_true: list = field(default_factory=list)
    members: dict = field(default_factory=dict)        # node -> list of set values
    weights: dict = field(default_factory=dict)        # node -> [(target, weight)]
    roots: list = field(default_factory=list)

    def add(self, feature, mode, value, true=-1, false=-1, nan_true=False):
        self.feature.append(int(feature))
        self.mode.append(mode)
        self.value.append(float(value))
        self.true.append(int(true))
        self.false.append(int(false))
        self.nan_true.append(bool(nan_true))
        return len(self.mode) - 1

    def add_weight(self, node, target, weight):
        self.weights.setdefault(node, []).append((int(target), float(weight)))


def from_classic(a, prefix, n_targets):
    """Trees of TreeEnsembleRegressor / TreeEnsembleClassifier (opsets 1 and 3): nodes named
    by (tree id, node id); `prefix` "target" or "class" names the leaf-weight attributes."""
    tree_ids = list(a.get("nodes_treeids", []))
    node_ids = list(a.get("nodes_nodeids", []))
    if not tree_ids or len(node_ids) != len(tree_ids):
        raise LoweringError("nodes_treeids and nodes_nodeids must name every node")
    n = len(tree_ids)
    index = {(t, i): k for k, (t, i) in enumerate(zip(tree_ids, node_ids))}
    if len(index) != n:
        raise LoweringError("two nodes share a (tree id, node id)")
    modes = [MODES.get(m) for m in _strings(a, "nodes_modes", n)]
    if None in modes or 6 in modes:    # set membership came with TreeEnsemble (opset 5)
        raise LoweringError(f"unknown node mode in {sorted(set(_strings(a, 'nodes_modes', n)))}")
    values = _floats(a, "nodes_values", n)
    feats = _ints(a, "nodes_featureids", n)
    nan_true = _ints(a, "nodes_missing_value_tracks_true", n, default=0)
    trees = Trees()
    child_ids = [_ints(a, attr, n, default=0) for attr in ("nodes_truenodeids",
                                                          "nodes_falsenodeids")]
    for k in range(n):
        t = tree_ids[k]
        kids = [-1, -1]
        if modes[k] != LEAF:
            for j, attr in enumerate(("nodes_truenodeids", "nodes_falsenodeids")):
                kids[j] = index.get((t, child_ids[j][k]), -2)
                if kids[j] == -2:
                    raise LoweringError(f"node {node_ids[k]} of tree {t}: {attr} names no node")
        trees.add(feats[k], modes[k], values[k], kids[0], kids[1], nan_true[k])
    child = {c for k in range(n) for c in (trees.true[k], trees.false[k]) if c >= 0}
    trees.roots = [k for k in range(n) if k not in child]
    w_tree, w_node = a.get(f"{prefix}_treeids", []), a.get(f"{prefix}_nodeids", [])
    w_ids = a.get(f"{prefix}_ids", [])
    w_vals = _floats(a, f"{prefix}_weights", len(w_ids))
    if not (len(w_tree) == len(w_node) == len(w_ids)):
        raise LoweringError(f"{prefix}_treeids/_nodeids/_ids differ in length")
    for t, i, target, w in zip(w_tree, w_node, w_ids, w_vals):
        if (t, i) not in index:
            raise LoweringError(f"{prefix} weight for node {i} of tree {t}, which does not exist")
        if not 0 <= target < n_targets:
            raise LoweringError(f"{prefix}_ids {target} out of range [0, {n_targets})")
        trees.add_weight(index[(t, i)], target, w)
    return trees


def from_v5(a, n_targets):
    """Trees of TreeEnsemble (ai.onnx.ml opset 5): node arrays indexed directly, children
    either nodes or leaves (nodes_trueleafs / nodes_falseleafs)."""
    missing = [k for k in ("nodes_featureids", "nodes_splits", "nodes_modes", "leaf_targetids",
                           "leaf_weights", "tree_roots", "nodes_truenodeids", "nodes_trueleafs",
                           "nodes_falsenodeids", "nodes_falseleafs") if k not in a]
    if missing:
        raise LoweringError(f"attributes {missing} are missing")
    feats = list(a["nodes_featureids"])
    n = len(feats)
    splits = np.asarray(a["nodes_splits"], np.float64).ravel()
    modes = np.asarray(a["nodes_modes"]).astype(np.int64).ravel()
    leaf_t = list(a["leaf_targetids"])
    leaf_w = np.asarray(a["leaf_weights"], np.float64).ravel()
    if not (len(splits) == len(modes) == n) or len(leaf_t) != len(leaf_w):
        raise LoweringError("node or leaf attributes differ in length")
    if any(m < 0 or m > 6 for m in modes):
        raise LoweringError(f"unknown node mode in {sorted(set(modes.tolist()))}")
    nan_true = _ints(a, "nodes_missing_value_tracks_true", n, default=0)
    trees = Trees()
    for k in range(n):
        trees.add(feats[k], int(modes[k]), splits[k], nan_true=nan_true[k])
    leaves = []
    for t, w in zip(leaf_t, leaf_w):
        if not 0 <= t < n_targets:
            raise LoweringError(f"leaf_targetids {t} out of range [0, {n_targets})")
        leaves.append(trees.add(0, LEAF, 0.0))
        trees.add_weight(leaves[-1], t, w)
    sides = [(list(a[attr]), list(a[leaf_attr]), attr, kids) for attr, leaf_attr, kids in (
        ("nodes_truenodeids", "nodes_trueleafs", trees.true),
        ("nodes_falsenodeids", "nodes_falseleafs", trees.false))]
    for k in range(n):
        for ids, leaf_flags, attr, kids in sides:
            i, is_leaf = ids[k], leaf_flags[k]
            pool = leaves if is_leaf else range(n)
            if not 0 <= i < len(pool):
                raise LoweringError(f"node {k}: {attr} {i} out of range")
            kids[k] = pool[i]
    _member_sets(trees, a.get("membership_values"), modes)
    trees.roots = [int(r) for r in a["tree_roots"]]
    if any(not 0 <= r < n for r in trees.roots):
        raise LoweringError("tree_roots names a node out of range")
    return trees


def _member_sets(trees, values, modes):
    """BRANCH_MEMBER nodes take the NaN-separated runs of membership_values, in order."""
    members = [k for k, m in enumerate(modes) if m == 6]
    if not members:
        return
    if values is None:
        raise LoweringError("BRANCH_MEMBER nodes need membership_values")
    runs, cur = [], []
    for v in np.asarray(values, np.float64).ravel():
        if np.isnan(v):
            runs.append(cur)
            cur = []
        else:
            cur.append(float(v))
    if cur:
        runs.append(cur)
    if len(runs) < len(members):
        raise LoweringError("fewer membership sets than BRANCH_MEMBER nodes")
    trees.members = dict(zip(members, runs))


@dataclass
class Flat:
    """The arrays of kernels/trees.forest, and what the lowering needs to call it."""
    arrays: dict
    fast: bool
    single: bool
    n_trees: int


def flatten(trees, n_features, n_targets, agg, x_dtype=np.float64):
    """The kernel's arrays for `trees` over inputs of `n_features` features of `x_dtype`."""
    n = len(trees.mode)
    if n_features < 1:
        raise LoweringError("a tree ensemble needs at least one feature")
    feat = np.zeros(n, np.int32)
    thr = np.zeros(n, np.float64)
    kids = np.zeros((n, 4), np.int32)     # true, false, NaN child; the feature tested
    mode = np.zeros(n, np.uint8)
    mstart, mvals = np.zeros(n + 1, np.int64), []
    for k in range(n):
        _flatten_node(trees, k, n_features, feat, thr, kids, mode)
        if mode[k] == 6:
            mvals.extend(trees.members[k])
        mstart[k + 1] = len(mvals)
    wstart, wtarget, wvalue = np.zeros(n + 1, np.int64), [], []
    leafw = np.zeros((n, n_targets), np.float64)
    every = True                  # every leaf writes every target
    for k in range(n):
        for t, w in trees.weights.get(k, ()):
            wtarget.append(t)
            wvalue.append(w)
            leafw[k, t] += w
        wstart[k + 1] = len(wtarget)
        if trees.mode[k] == LEAF:
            every = every and len({t for t, _ in trees.weights.get(k, ())}) == n_targets
    kids[:, 3] = feat
    if np.dtype(x_dtype) == np.float32 and not mode.any():
        thr = _below_f32(thr)          # float32 rows compare with float32 thresholds
    arrays = dict(roots=np.array(trees.roots, np.int64), depth=_depths(trees), feat=feat,
                  thr=thr, kids=kids, mode=mode, mstart=mstart, mvals=np.array(mvals, np.float64),
                  wstart=wstart, wtarget=np.array(wtarget, np.int64),
                  wvalue=np.array(wvalue, np.float64), leafw=leafw.ravel())
    # SUM/AVERAGE may add dense leaf rows when no target can go unwritten (with one target
    # an unwritten one reads 0 all the same)
    single = agg in (AGGREGATES["SUM"], AGGREGATES["AVERAGE"]) and (every or n_targets == 1)
    return Flat(arrays, not mode.any(), single, len(trees.roots))


def _below_f32(thr):
    """float32 thresholds t' with v <= t' <=> v <= t for every float32 v: t rounded down."""
    t32 = thr.astype(np.float32)
    over = t32.astype(np.float64) > thr
    t32[over] = np.nextafter(t32[over], np.float32(-np.inf))
    return t32


def _flatten_node(trees, k, n_features, feat, thr, kids, mode):
    """Node k as kernels/trees.py walks it: every order test becomes `v <= thr`."""
    m, t = trees.mode[k], trees.value[k]
    if m == LEAF:
        kids[k, :3] = k
        return
    if not 0 <= trees.feature[k] < n_features:
        raise LoweringError(f"a node tests feature {trees.feature[k]}, but the input has "
                            f"{n_features} features")
    feat[k] = trees.feature[k]
    yes, no = trees.true[k], trees.false[k]
    nan_dest = yes if trees.nan_true[k] or m == 5 else no
    if m in (0, 1, 2, 3):
        below = np.nextafter(t, -np.inf) if m in (1, 2) else t   # v < t  <=>  v <= below
        if np.isnan(t):
            yes = no
        elif m in (1, 2) and t == -np.inf:
            below = np.nan                                      # v < -inf never holds
        if m in (2, 3):
            yes, no = no, yes                                   # v >= t  <=>  not v < t
        kids[k, :3] = (yes, no, nan_dest)
        thr[k] = below
        return
    kids[k, :3] = (yes, no, nan_dest)
    thr[k] = t
    mode[k] = m


def _depths(trees):
    """Per tree, the most steps from its root to a leaf (a cycle is an error)."""
    out = np.zeros(len(trees.roots), np.int64)
    for i, root in enumerate(trees.roots):
        stack, deepest, n = [(root, 0)], 0, len(trees.mode)
        while stack:
            k, d = stack.pop()
            if d > n:
                raise LoweringError("a tree's nodes form a cycle")
            if trees.mode[k] == LEAF:
                deepest = max(deepest, d)
            else:
                stack += [(trees.true[k], d + 1), (trees.false[k], d + 1)]
        out[i] = deepest
    return out


def _ints(a, name, n, default=None):
    v = a.get(name)
    if v is None or len(v) == 0:
        if default is None:
            raise LoweringError(f"attribute {name} is missing")
        return [default] * n
    if len(v) != n:
        raise LoweringError(f"attribute {name} has {len(v)} entries, expected {n}")
    return [int(x) for x in v]


def _strings(a, name, n):
    v = a.get(name) or []
    if len(v) != n:
        raise LoweringError(f"attribute {name} has {len(v)} entries, expected {n}")
    return v


def _floats(a, name, n):
    """A float list attribute or its *_as_tensor twin, as float64."""
    v = a.get(f"{name}_as_tensor")
    if v is None:
        v = a.get(name)
    v = np.asarray(v if v is not None else [], np.float64).ravel()
    if len(v) != n:
        raise LoweringError(f"attribute {name} has {len(v)} entries, expected {n}")
    return v
