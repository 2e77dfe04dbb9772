"""Classic-ML kernels (ai.onnx.ml, lowered by ops/ml.py): linear models, SVMs, Normalizer,
LabelEncoder / CategoryMapper / OneHotEncoder lookups. Scores are computed as ONNX Runtime
computes them (inputs cast to float32, float32 dot products and outputs, its score transforms
from trees.py and its two-class special cases).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

from .simd import LANES16 as LANES, vfma, vhsum, vload, vloadm, vzero
from .trees import (LOGISTIC, NONE, PROBIT, SOFTMAX, SOFTMAX_ZERO, logistic, probit,
                    transform_row)

from . import JIT as _JIT
# reassociation lets LLVM vectorize the dot products' reductions (NaN and inf still propagate)
_DOT = dict(cache=True, error_model="numpy", no_cfunc_wrapper=True, fastmath={"reassoc", "contract"})

# SVM kernels
LINEAR, POLY, RBF, SIGMOID = 0, 1, 2, 3


@njit(**_DOT)
def _dot(x, r, w, j):
    """x[r] . w[j] in float32 (x cast to float32 first), as ORT's float GEMM computes it."""
    acc = np.float32(0)
    for c in range(x.shape[1]):
        acc += np.float32(x[r, c]) * w[j, c]
    return acc


def _flat_f32(x):
    """x as a flat C-contiguous float32 array (a view when it already is one)."""


@overload(_flat_f32)
def _flat_f32_impl(x):
    if x.dtype == types.float32:
        return lambda x: np.ascontiguousarray(x).reshape(-1)
    return lambda x: np.ascontiguousarray(x).astype(np.float32).reshape(-1)


@njit(**_JIT)
def _scores(x, coef, intercepts):
    """float32 [N, T]: x . coef^T + intercepts in float32 (x cast first), four rows at a time
    in 16-lane vectors (one dot at a time waited on its own adds and ran its ragged end in
    scalars: 3-4x slower on 100 features)."""
    n, c = x.shape
    t = coef.shape[0]
    xf = _flat_f32(x)
    wf = _flat_f32(coef)
    s = np.empty((n, t), np.float32)
    full = c - c % LANES
    rem = c - full
    r = 0
    while r + 4 <= n:
        x0 = r * c
        for j in range(t):
            w0 = j * c
            a0, a1, a2, a3 = vzero(), vzero(), vzero(), vzero()
            for k in range(0, full, LANES):
                w = vload(wf, w0 + k)
                a0 = vfma(vload(xf, x0 + k), w, a0)
                a1 = vfma(vload(xf, x0 + c + k), w, a1)
                a2 = vfma(vload(xf, x0 + 2 * c + k), w, a2)
                a3 = vfma(vload(xf, x0 + 3 * c + k), w, a3)
            if rem:
                w = vloadm(wf, w0 + full, rem)
                a0 = vfma(vloadm(xf, x0 + full, rem), w, a0)
                a1 = vfma(vloadm(xf, x0 + c + full, rem), w, a1)
                a2 = vfma(vloadm(xf, x0 + 2 * c + full, rem), w, a2)
                a3 = vfma(vloadm(xf, x0 + 3 * c + full, rem), w, a3)
            b = intercepts[j]
            s[r, j] = vhsum(a0) + b
            s[r + 1, j] = vhsum(a1) + b
            s[r + 2, j] = vhsum(a2) + b
            s[r + 3, j] = vhsum(a3) + b
        r += 4
    for q in range(r, n):
        for j in range(t):
            s[q, j] = np.float32(_dot(x, q, coef, j) + intercepts[j])
    return s


@njit(**_DOT)
def _sqdist(x, r, w, j):
    """|x[r] - w[j]|^2 in float32, as ORT's RBF kernel."""
    acc = np.float32(0)
    for c in range(x.shape[1]):
        d = np.float32(x[r, c]) - w[j, c]
        acc += d * d
    return acc


# -- LinearClassifier / LinearRegressor -------------------------------------------------------

@njit(**_JIT)
def transform_rows(z, post):
    """trees.transform_row over every row of z (float32 [N, K], K >= 2), in one loop nest
    (a call per row cost as much as the softmax itself)."""
    n, k = z.shape
    if post == LOGISTIC:
        for r in range(n):
            for j in range(k):
                z[r, j] = logistic(z[r, j])
    elif post == PROBIT:
        for r in range(n):
            for j in range(k):
                z[r, j] = probit(z[r, j])
    elif post == SOFTMAX or post == SOFTMAX_ZERO:
        for r in range(n):
            vmax = np.float32(-3.4028234663852886e38)
            for j in range(k):
                if z[r, j] > vmax:
                    vmax = z[r, j]
            total = np.float32(0)
            if post == SOFTMAX:
                for j in range(k):
                    e = np.float32(math.exp(z[r, j] - vmax))
                    z[r, j] = e
                    total += e
            else:
                eneg = np.float32(math.exp(-vmax))
                for j in range(k):
                    v = z[r, j]
                    if v > np.float32(1e-7) or v < np.float32(-1e-7):
                        z[r, j] = np.float32(math.exp(v - vmax))
                        total += z[r, j]
                    else:
                        z[r, j] = v * eneg
            for j in range(k):
                z[r, j] = z[r, j] / total


@njit(**_JIT)
def linear_classifier(x, coef, intercepts, labels, post, add_second):
    """(label int64 [N], scores float32 [N, K]) of LinearClassifier as ORT computes them:
    scores = x . coef^T + intercepts; one target: label labels[1] if its score > 0 else
    labels[0] (`labels` then holds that pair), the score s (LOGISTIC / PROBIT applied, the
    softmaxes ignored) made two columns [1 - s, s] (ORT 1.31); several: the first best target's label, the row
    transformed by `post`."""
    n = x.shape[0]
    t = coef.shape[0]
    k = 2 if add_second else t
    y = np.empty(n, np.int64)
    z = np.empty((n, k), np.float32)
    s = _scores(x, coef, intercepts)
    for r in range(n):
        if t == 1:
            v = s[r, 0]
            y[r] = labels[1] if v > 0 else labels[0]
            if post == LOGISTIC:
                v = logistic(v)
            elif post == PROBIT:
                v = probit(v)
            if add_second:
                z[r, 0] = np.float32(1) - v
                z[r, 1] = v
            else:
                z[r, 0] = v
            continue
        best = 0
        for j in range(t):
            z[r, j] = s[r, j]
            if z[r, j] > z[r, best]:
                best = j
        y[r] = labels[best]
    if t > 1 and post != NONE:
        transform_rows(z, post)
    return y, z


@njit(**_JIT)
def linear_regressor(x, coef, intercepts, post):
    """float32 [N, targets] = x . coef^T + intercepts, then `post` (one target: PROBIT only),
    as ORT's LinearRegressor."""
    n = x.shape[0]
    t = coef.shape[0]
    z = _scores(x, coef, intercepts)
    for r in range(n):
        if t == 1 and post == PROBIT:
            z[r, 0] = probit(z[r, 0])
    if t > 1 and post != NONE:
        transform_rows(z, post)
    return z


# -- SVMClassifier / SVMRegressor -------------------------------------------------------------

@njit(**_JIT)
def _kernel_row(x, r, sv, kind, gamma, coef0, degree, out):
    """out[j] = K(x[r], sv[j]) for every support vector, in float32 as ORT's kernels."""
    for j in range(sv.shape[0]):
        if kind == RBF:
            out[j] = np.float32(math.exp(-gamma * np.float32(_sqdist(x, r, sv, j))))
            continue
        d = np.float32(_dot(x, r, sv, j))
        if kind == LINEAR:
            out[j] = d
            continue
        v = np.float32(gamma * d + coef0)
        if kind == POLY:
            if degree == 2:
                out[j] = v * v
            elif degree == 3:
                out[j] = v * v * v
            else:
                out[j] = np.float32(v ** degree)
        else:
            out[j] = np.float32(math.tanh(v))


@njit(**_JIT)
def _sigmoid_probability(score, a, b):
    return np.float32(1) - logistic(np.float32(score * a + b))


@njit(**_JIT)
def _multiclass_probability(k, r, p):
    """libsvm's pairwise coupling (ORT's multiclass_probability): p [k] from r [k, k]."""
    q = np.zeros((k, k), np.float32)
    qp = np.zeros(k, np.float32)
    eps = np.float32(0.005) / np.float32(k)
    for i in range(k):
        p[i] = np.float32(1) / np.float32(k)
        for j in range(i):
            q[i, i] += r[j, i] * r[j, i]
            q[i, j] = q[j, i]
        for j in range(i + 1, k):
            q[i, i] += r[j, i] * r[j, i]
            q[i, j] = -r[j, i] * r[i, j]
    for _ in range(100):
        pqp = np.float32(0)
        for i in range(k):
            qp[i] = 0
            for j in range(k):
                qp[i] += q[i, j] * p[j]
            pqp += p[i] * qp[i]
        max_error = np.float32(0)
        for i in range(k):
            err = abs(qp[i] - pqp)
            if err > max_error:
                max_error = err
        if max_error < eps:
            break
        for i in range(k):
            diff = (-qp[i] + pqp) / q[i, i]
            p[i] += diff
            pqp = (pqp + diff * (diff * q[i, i] + np.float32(2) * qp[i])) / \
                (np.float32(1) + diff) / (np.float32(1) + diff)
            for j in range(k):
                qp[j] = (qp[j] + diff * q[i, j]) / (np.float32(1) + diff)
                p[j] /= (np.float32(1) + diff)


@njit(**_JIT)
def svm_classifier(x, sv, starts, counts, coef, rho, proba, probb, labels, kind, gamma, coef0,
                   degree, post, all_positive):
    """(label int64 [N], scores float32 [N, K]) of SVMClassifier as ORT computes them.

    With support vectors (SVC): one-vs-one decision values over the class pairs (coef
    [classes - 1, vectors], libsvm's layout), votes pick the label; with prob_a/prob_b the
    pairwise probabilities are coupled into class probabilities; two classes without them give
    two columns. Without support vectors (liblinear): scores = K(x, coef rows) + rho[0].
    `labels` are the class labels as int64 (class indices for string labels)."""
    n = x.shape[0]
    nc = labels.size
    npairs = nc * (nc - 1) // 2
    have_proba = proba.size > 0
    svc = sv.shape[0] > 0
    if svc and not have_proba:
        width = npairs if nc > 2 else 2
        nscores = npairs
        extra = (2 if post == NONE else 0) if nc <= 2 else -1
    else:
        width = nc
        nscores = nc
        extra = -1
    y = np.empty(n, np.int64)
    z = np.zeros((n, width), np.float32)
    kern = np.empty(max(sv.shape[0], coef.shape[0]), np.float32)
    pair = np.empty(max(npairs, 1), np.float32)
    votes = np.zeros(nc, np.int64)
    rp = np.zeros((nc, nc), np.float32)
    s = np.empty(max(width, 2), np.float32)
    for r in range(n):
        max_weight = np.float32(0)
        if svc:
            _kernel_row(x, r, sv, kind, gamma, coef0, degree, kern)
            votes[:] = 0
            idx = 0
            for i in range(nc - 1):
                for j in range(i + 1, nc):
                    acc = 0.0
                    for m in range(counts[i]):
                        acc += np.float64(coef[j - 1, starts[i] + m]) * kern[starts[i] + m]
                    for m in range(counts[j]):
                        acc += np.float64(coef[i, starts[j] + m]) * kern[starts[j] + m]
                    acc += rho[idx]
                    pair[idx] = np.float32(acc)
                    idx += 1
                    if acc > 0:
                        votes[i] += 1
                    else:
                        votes[j] += 1
            best = 0
            for i in range(1, nc):
                if votes[i] > votes[best]:
                    best = i
            if have_proba:
                idx = 0
                for i in range(nc - 1):
                    for j in range(i + 1, nc):
                        v = _sigmoid_probability(pair[idx], proba[idx], probb[idx])
                        v = min(max(v, np.float32(1e-7)), np.float32(1) - np.float32(1e-7))
                        rp[i, j] = v
                        rp[j, i] = np.float32(1) - v
                        idx += 1
                _multiclass_probability(nc, rp, s[:nc])
            else:
                for i in range(npairs):
                    s[i] = pair[i]
        else:
            _kernel_row(x, r, coef, kind, gamma, coef0, degree, kern)
            for i in range(nc):
                s[i] = kern[i] + np.float32(rho[0]) if kind == LINEAR else kern[i]
            best = 0
            for i in range(1, nc):
                if s[i] > s[best]:
                    best = i
            max_weight = s[best]
        if npairs == 1 and nc == 2 and not have_proba:
            if all_positive and max_weight >= 0.5:
                y[r] = labels[1]
            elif max_weight > 0 and not all_positive:
                y[r] = labels[1]
            else:
                y[r] = labels[best]
        else:
            y[r] = labels[best]
        # ORT's batched_update_scores_inplace on this row's scores
        if nscores > 1:
            if post != NONE:
                transform_row(s[:nscores], post)
            for j in range(nscores):
                z[r, j] = s[j]
        elif post == PROBIT:
            z[r, 0] = probit(s[0])
        elif extra == 0:    # a transform given: [1 - v, v] of the (logistic) score (ORT 1.31)
            v = logistic(s[0]) if post == LOGISTIC else s[0]
            z[r, 0] = np.float32(1) - v
            z[r, 1] = v
        elif extra == 2:
            z[r, 0] = -s[0]
            z[r, 1] = s[0]
        else:
            z[r, 0] = s[0]
    return y, z


@njit(**_JIT)
def svm_regressor(x, sv, coef, rho, kind, gamma, coef0, degree, one_class, post):
    """float32 [N, 1] of SVMRegressor: sum_j coef[j] K(x, sv[j]) + rho[0] (liblinear, no
    support vectors: K(x, coef) + rho[0]); one_class gives +-1; PROBIT as ORT would apply."""
    n = x.shape[0]
    z = np.empty((n, 1), np.float32)
    svc = sv.shape[0] > 0
    kern = np.empty(max(sv.shape[0], 1), np.float32)
    w = coef.reshape(1, coef.size)
    for r in range(n):
        if svc:
            _kernel_row(x, r, sv, kind, gamma, coef0, degree, kern)
            acc = 0.0
            for j in range(sv.shape[0]):
                acc += np.float64(coef[j]) * kern[j]
            v = np.float32(acc + rho[0])
        else:
            _kernel_row(x, r, w, kind, gamma, coef0, degree, kern)
            v = np.float32(kern[0] + np.float32(rho[0])) if kind == LINEAR else kern[0]
        if one_class:
            v = np.float32(1) if v > 0 else np.float32(-1)
        elif post == PROBIT:
            v = probit(v)
        z[r, 0] = v
    return z


# -- Normalizer -------------------------------------------------------------------------------

@njit(**_JIT)
def normalizer(x, norm):
    """float32 [N, C] rows of x divided by their MAX (0: the largest value, not magnitude, as
    ORT; onnx's reference takes the magnitude), L1 (1) or L2 (2) norm, as ORT's Normalizer (a
    row whose norm is 0 is left as it is)."""
    n, c = x.shape
    z = np.empty((n, c), np.float32)
    for r in range(n):
        if norm == 0:
            d = np.float32(x[r, 0])
            for j in range(1, c):
                v = np.float32(x[r, j])
                if v > d:
                    d = v
        elif norm == 1:
            d = np.float32(0)
            for j in range(c):
                d += abs(np.float32(x[r, j]))
        else:
            d = np.float32(0)
            for j in range(c):
                v = np.float32(x[r, j])
                d += v * v
            d = np.float32(math.sqrt(d))
        for j in range(c):
            v = np.float32(x[r, j])
            z[r, j] = v / d if d != 0 else v
    return z


# -- lookups ----------------------------------------------------------------------------------

@njit(**_JIT)
def sorted_lookup(x, keys, order, nan_index, miss):
    """int64 codes, shaped like x: order[i] where x equals keys[i] (keys sorted ascending),
    nan_index for NaN (when a key is NaN), else `miss`."""
    flat = x.ravel()
    out = np.empty(flat.size, np.int64)
    nk = keys.size
    for i in range(flat.size):
        v = flat[i]
        if v != v:
            out[i] = nan_index
            continue
        j = np.searchsorted(keys, v)
        out[i] = order[j] if j < nk and keys[j] == v else miss
    return out.reshape(x.shape)


@njit(**_JIT)
def take_default(codes, values, default, like):
    """values[code] (cast to like's dtype), or default where the code is -1."""
    flat = codes.ravel()
    out = np.empty(flat.size, like.dtype)
    for i in range(flat.size):
        c = flat[i]
        out[i] = default[0] if c < 0 else values[c]
    return out.reshape(codes.shape)


@njit(**_JIT)
def one_hot_codes(codes, k, zeros):
    """float32 codes.shape + (k,): 1 at each code; a code of -1 (no category) is a row of
    zeros, or an error when zeros == 0 (as ORT refuses it)."""
    flat = codes.ravel()
    out = np.zeros((flat.size, k), np.float32)
    for i in range(flat.size):
        c = flat[i]
        if c < 0:
            if not zeros:
                raise ValueError("OneHotEncoder: a value is not one of the categories "
                                 "(zeros=0)")
            continue
        out[i, c] = 1
    return out
