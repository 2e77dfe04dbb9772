"""Tree ensembles (ai.onnx.ml TreeEnsemble*, flattened by ops/ml_forest.py) and ONNX Runtime's
score transforms (post_transform) for the classic-ML ops.

Every node, leaves included, is one row of `kids` (int32 [nodes, 3]: the next node when the
test holds, when it fails, when the feature is NaN); a leaf points to itself three times. A
tree is then walked a fixed number of steps (its depth) for a block of rows at once: no test
for leaves, and the rows' walks are independent, so the CPU overlaps their loads. Trees are
the outer loop within a row block, so one tree's nodes stay in cache for the whole block.

Tests (`mode`): 0 `v <= thr` (BRANCH_LEQ/LT/GTE/GT are all rewritten to it at compile time,
children swapped and LT's threshold moved to the next float below), 4 `v == thr`,
5 `v != thr`, 6 `v` in the node's set `mvals[mstart[n]:mstart[n + 1]]`. `fast` says every
node is mode 0: the step is then `kids[n, 1 - (v <= t) + isnan(v)]`, without branches.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from . import PRANGE_ONLY
from .parallel import I0, num_threads

from . import JIT as _JIT

BLOCK = 64                 # rows walked together through one tree
PAR_MIN_ROWS = 4 * BLOCK   # from this many rows the row blocks split over threads
# Below PAR_MIN_ROWS the trees split over threads instead (each thread all rows, its share of
# the trees, its own sums; merged after), from this many row x tree walks: 100 rows of a
# 100-tree forest ran on one thread while ONNX Runtime split its trees over two.
PAR_MIN_WALKS = 2048

# aggregate functions
AVERAGE, SUM, MIN, MAX = 0, 1, 2, 3
# post transforms
NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO, PROBIT = 0, 1, 2, 3, 4


@njit(parallel=PRANGE_ONLY, **_JIT)
def forest(x, roots, depth, feat, thr, kids, mode, mstart, mvals, wstart, wtarget, wvalue,
           leafw, n_targets, agg, fast, single):
    """(scores float64 [N, n_targets], has uint8 [N, n_targets]) of the trees over the rows
    of x [N, F]: SUM/AVERAGE add the leaves' weights (MIN/MAX keep the extreme), `has` marks
    the targets some leaf wrote. `single`: SUM/AVERAGE with every target written at every
    leaf (or one target), the weights dense in `leafw` [nodes * targets]."""
    n = x.shape[0]
    acc = np.zeros((n, n_targets), np.float64)
    has = np.zeros((n, n_targets), np.uint8)
    nblocks = (n + BLOCK - 1) // BLOCK
    ntrees = roots.size
    nt = num_threads()
    if nt > 1 and n >= PAR_MIN_ROWS:
        for b in prange(nblocks):
            _forest_block(x, roots, depth, feat, thr, kids, mode, mstart, mvals, wstart, wtarget,
                          wvalue, leafw, agg, fast, single, acc, has, b, I0, ntrees)
    elif nt > 1 and n * ntrees >= PAR_MIN_WALKS and ntrees >= 2:
        nt = min(nt, ntrees)
        accs = np.zeros((nt, n, n_targets), np.float64)
        hass = np.zeros((nt, n, n_targets), np.uint8)
        # thread t walks every row through trees [t0, t1) (an even share) into accs[t], hass[t]
        for t in prange(nt):
            t0, t1 = t * ntrees // nt, (t + 1) * ntrees // nt
            for b in range(nblocks):
                _forest_block(x, roots, depth, feat, thr, kids, mode, mstart, mvals, wstart,
                              wtarget, wvalue, leafw, agg, fast, single, accs[t], hass[t], b, t0,
                              t1)
        for t in range(nt):      # merged in thread order: the same sums whatever the timing
            for r in range(n):
                for g in range(n_targets):
                    if hass[t, r, g]:
                        _merge(acc, has, r, g, accs[t, r, g], agg)
    else:
        for b in range(nblocks):
            _forest_block(x, roots, depth, feat, thr, kids, mode, mstart, mvals, wstart,
                          wtarget, wvalue, leafw, agg, fast, single, acc, has, b, I0, ntrees)
    return acc, has


@njit(**_JIT)
def _forest_block(x, roots, depth, feat, thr, kids, mode, mstart, mvals, wstart, wtarget,
                  wvalue, leafw, agg, fast, single, acc, has, b, t0, t1):
    """Rows of block b through trees [t0, t1) into acc/has."""
    r0 = b * BLOCK
    r1 = min(r0 + BLOCK, x.shape[0])
    idx = np.empty(r1 - r0, np.int32)
    for t in range(t0, t1):
        for r in range(r1 - r0):
            idx[r] = roots[t]
        if fast:
            _walk(x.reshape(x.size), x.shape[1], r0, idx, kids.reshape(kids.size), thr,
                  depth[t])
        else:
            for _ in range(depth[t]):
                for r in range(r1 - r0):
                    nd = idx[r]
                    idx[r] = kids[nd, _test(x[r0 + r, kids[nd, 3]], nd, thr, mode,
                                            mstart, mvals)]
        if single:
            _add_dense(acc, r0, idx, leafw)
        else:
            for r in range(r1 - r0):
                nd = idx[r]
                for k in range(wstart[nd], wstart[nd + 1]):
                    _merge(acc, has, r0 + r, wtarget[k], wvalue[k], agg)
    if single:
        has[r0:r1, :] = 1


@njit(**_JIT)
def _add_dense(acc, r0, idx, leafw):
    """acc[r0 + r, :] += the weights of the leaf row r reached (leafw [nodes * targets])."""
    k = np.uint64(acc.shape[1])
    af = acc.reshape(acc.size)
    row = np.uint64(r0) * k
    for r in range(idx.size):
        w = np.uint64(idx[r]) * k
        for j in range(k):
            af[row + j] += leafw[w + j]
        row += k


@njit(**_JIT)
def _walk(xf, nf, r0, idx, kids, thr, steps):
    """`steps` steps of every row's walk (mode 0 nodes only), branch-free; 1-D arrays and
    unsigned indices keep the step at a dozen instructions (no negative-index fix-ups)."""
    nf, base = np.uint64(nf), np.uint64(r0) * np.uint64(nf)
    four = np.uint64(4)
    for _ in range(steps):
        row = base
        for r in range(idx.size):
            nd = np.uint64(idx[r])
            k = nd * four
            v = xf[row + np.uint64(kids[k + np.uint64(3)])]
            step = np.uint64(1) - np.uint64(v <= thr[nd]) + np.uint64(v != v)
            idx[r] = kids[k + step]
            row += nf


@njit(inline="always", **_JIT)
def _test(v, nd, thr, mode, mstart, mvals):
    """Column of kids to follow: 0 the test holds, 1 it fails, 2 v is NaN."""
    v = np.float64(v)
    if v != v:
        return 2
    m = mode[nd]
    if m == 0:
        ok = v <= thr[nd]
    elif m == 4:
        ok = v == thr[nd]
    elif m == 5:
        ok = v != thr[nd]
    else:
        ok = False
        for k in range(mstart[nd], mstart[nd + 1]):
            if mvals[k] == v:
                ok = True
    return 0 if ok else 1


@njit(inline="always", **_JIT)
def _merge(acc, has, r, tg, w, agg):
    if agg == MIN:
        if not has[r, tg] or w < acc[r, tg]:
            acc[r, tg] = w
    elif agg == MAX:
        if not has[r, tg] or w > acc[r, tg]:
            acc[r, tg] = w
    else:
        acc[r, tg] += w
    has[r, tg] = 1


# -- ONNX Runtime's score transforms, in float32 as it computes them (ml_common.h) -------------

@njit(**_JIT)
def logistic(v):
    v = np.float32(v)
    e = np.float32(1) / (np.float32(1) + np.float32(math.exp(-abs(v))))
    return np.float32(1) - e if v < 0 else e


@njit(**_JIT)
def probit(v):
    """sqrt(2) * erfinv(2v - 1) with ORT's approximation of erfinv (Winitzki, a = 0.147)."""
    x = np.float32(2) * np.float32(v) - np.float32(1)
    sgn = np.float32(-1) if x < 0 else np.float32(1)
    x = (np.float32(1) - x) * (np.float32(1) + x)
    lg = np.float32(math.log(x))
    a = np.float32(2) / (np.float32(math.pi) * np.float32(0.147)) + np.float32(0.5) * lg
    a2 = np.float32(1) / np.float32(0.147) * lg
    a3 = -a + np.float32(math.sqrt(a * a - a2))
    return np.float32(math.sqrt(2)) * sgn * np.float32(math.sqrt(a3))


@njit(**_JIT)
def transform_row(s, post):
    """s (float32 [k], k >= 2) transformed in place by post_transform."""
    k = s.size
    if post == LOGISTIC:
        for j in range(k):
            s[j] = logistic(s[j])
    elif post == PROBIT:
        for j in range(k):
            s[j] = probit(s[j])
    elif post == SOFTMAX or post == SOFTMAX_ZERO:
        vmax = np.float32(-3.4028234663852886e38)
        for j in range(k):
            if s[j] > vmax:
                vmax = s[j]
        total = np.float32(0)
        if post == SOFTMAX:
            for j in range(k):
                s[j] = np.float32(math.exp(s[j] - vmax))
                total += s[j]
        else:
            eneg = np.float32(math.exp(-vmax))
            for j in range(k):
                if s[j] > np.float32(1e-7) or s[j] < np.float32(-1e-7):
                    s[j] = np.float32(math.exp(s[j] - vmax))
                    total += s[j]
                else:
                    s[j] = s[j] * eneg
        for j in range(k):
            s[j] = s[j] / total


@njit(**_JIT)
def regression_scores(acc, has, n_trees, agg, base, post, out_dtype_like):
    """TreeEnsembleRegressor / TreeEnsemble outputs from forest's scores, as ORT finalizes
    them: base values are added when there is one per target; one target takes only PROBIT
    (its other transforms are ignored); with several, a target no leaf wrote gives 0."""
    n, k = acc.shape
    use_base = base.size == k
    y = np.empty((n, k), out_dtype_like.dtype)
    s = np.empty(k, np.float32)
    for r in range(n):
        if k == 1:
            v = acc[r, 0]
            if agg == AVERAGE:
                v = v / n_trees
            elif (agg == MIN or agg == MAX) and not has[r, 0]:
                v = 0.0
            if use_base:
                v += base[0]
            y[r, 0] = probit(v) if post == PROBIT else v
            continue
        for j in range(k):
            v = acc[r, j] / n_trees if agg == AVERAGE else acc[r, j]
            if use_base:
                v += base[j]
            s[j] = v if has[r, j] else 0.0
        if post == NONE:
            for j in range(k):
                y[r, j] = acc[r, j] / n_trees if agg == AVERAGE else acc[r, j]
                if use_base:
                    y[r, j] += base[j]
                if not has[r, j]:
                    y[r, j] = 0
        else:
            transform_row(s, post)
            for j in range(k):
                y[r, j] = s[j]
    return y


@njit(**_JIT)
def classifier_scores(acc, has, base, post, labels, binary_case, all_positive):
    """(label int64 [N], scores float32 [N, classes]) of TreeEnsembleClassifier as ORT's
    TreeAggregatorClassifier computes them, its two-class special cases included; `labels`
    are the int64 class labels (the class indices for string labels)."""
    n, k = acc.shape
    y = np.empty(n, np.int64)
    z = np.zeros((n, k), np.float32)
    s = np.empty(max(k, 2), np.float64)
    h = np.empty(max(k, 2), np.uint8)
    for r in range(n):
        for j in range(k):
            s[j] = acc[r, j]
            h[j] = has[r, j]
        if k > 2:
            for j in range(base.size):
                s[j] = s[j] + base[j] if h[j] else base[j]
                h[j] = 1
            best = -1
            for j in range(k):
                if h[j] and (best == -1 or s[j] > s[best]):
                    best = j
            y[r] = labels[best]
            _write_scores(z[r], s, h, k, post, -1)
            continue
        size, extra = 2, -1
        if base.size == 2:
            if h[1]:
                s[1] = base[1] + s[0]
                s[0] = -s[1]
            else:
                s[1] += base[1]
                s[0] += base[0]
        elif base.size == 1:
            s[0] += base[0]
            if not h[1]:
                size = 1
        elif base.size == 0:
            extra = 3
            if not h[1]:
                size = 1
        if size == 2 and h[1]:
            pos = s[1]
        else:
            pos = s[0] if h[0] else 0.0
        if binary_case:
            if all_positive:
                positive = pos > 0.5
                extra = 0 if positive else 1
            else:
                positive = pos > 0
                extra = 2 if positive else 3
            y[r] = labels[1] if positive else labels[0]
        else:
            y[r] = 1 if pos > 0 else 0
        _write_scores(z[r], s, h, size, post, extra)
    return y, z


@njit(**_JIT)
def _write_scores(z, s, h, size, post, extra):
    """ORT's write_scores: `size` scores (a class nobody scored reads 0), transformed; one
    score becomes two by `extra` (add_second_class)."""
    if size >= 2:
        t = np.empty(size, np.float32)
        for j in range(size):
            t[j] = s[j] if h[j] else 0.0
        transform_row(t, post)
        for j in range(size):
            z[j] = t[j]
        return
    v = s[0] if h[0] else 0.0
    if post == PROBIT:
        z[0] = probit(v)
    elif extra == 0 or extra == 1:
        z[0] = np.float32(1) - np.float32(v)
        z[1] = v
    elif extra == 2 or extra == 3:
        if post == LOGISTIC:
            z[0] = logistic(-v)
            z[1] = logistic(v)
        else:
            z[0] = -v
            z[1] = v
    else:
        z[0] = v
