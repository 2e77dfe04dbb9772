"""Kernels whose output size depends on the data (NonZero, Compress, NonMaxSuppression,
Unique): each counts, allocates and fills at run time. The staged driver (onnxjit/staged.py)
calls them between compiled segments; the segment after one is specialized on the size that
comes out."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, no_cfunc_wrapper=True)
def nonzero(x):
    """ONNX NonZero of a C-contiguous array: int64 [rank, count], the indices in C order."""
    flat = x.reshape(-1)
    rank = x.ndim
    count = 0
    for i in range(flat.size):
        if flat[i] != 0:
            count += 1
    out = np.empty((rank, count), np.int64)
    k = 0
    for i in range(flat.size):
        if flat[i] != 0:
            rest = i
            for d in range(rank - 1, -1, -1):
                out[d, k] = rest % x.shape[d]
                rest //= x.shape[d]
            k += 1
    return out


def nonzero_indices(x):
    """NonZero: int64 [rank, count] (a scalar counts as rank 1, as onnx's reference has it)."""
    if type(x) is not np.ndarray or not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    return nonzero(x.reshape(1) if x.ndim == 0 else x)


@njit(cache=True, no_cfunc_wrapper=True)
def compress_rows(x3, cond):
    """x3 viewed as [outer, n, inner]: the rows along the middle axis whose condition is
    true (cond shorter than n: the rest dropped)."""
    outer, n, inner = x3.shape
    m = min(n, cond.size)
    count = 0
    for i in range(m):
        if cond[i]:
            count += 1
    out = np.empty((outer, count, inner), x3.dtype)
    for o in range(outer):
        k = 0
        for i in range(m):
            if cond[i]:
                for j in range(inner):
                    out[o, k, j] = x3[o, i, j]
                k += 1
    return out


def compress(x, condition, axis=None):
    """ONNX Compress: the slices along `axis` (the flattened input when None) where
    `condition` is true."""
    x = np.ascontiguousarray(x)
    cond = np.ascontiguousarray(condition).reshape(-1).astype(np.bool_)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = axis + x.ndim if axis < 0 else axis
    if cond.size > x.shape[axis]:
        # ONNX allows a shorter condition; a longer one selecting past the end is an error
        if cond[x.shape[axis]:].any():
            raise IndexError(f"Compress: condition selects index {int(np.flatnonzero(cond)[-1])} "
                             f"beyond dimension {x.shape[axis]}")
    outer = int(np.prod(x.shape[:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    out = compress_rows(x.reshape(outer, x.shape[axis], inner), cond)
    return out.reshape(x.shape[:axis] + (out.shape[1],) + x.shape[axis + 1:])


@njit(cache=True, no_cfunc_wrapper=True)
def _corners(b, center):
    if center:
        hw, hh = b[2] * 0.5, b[3] * 0.5
        return b[1] - hh, b[0] - hw, b[1] + hh, b[0] + hw
    y0, y1 = min(b[0], b[2]), max(b[0], b[2])
    x0, x1 = min(b[1], b[3]), max(b[1], b[3])
    return y0, x0, y1, x1


@njit(cache=True, no_cfunc_wrapper=True)
def nms(boxes, scores, max_per_class, iou_threshold, score_threshold, use_score, center):
    """ONNX NonMaxSuppression: int64 [selected, 3] (batch, class, box). Candidates in
    descending score order (ties: lower box index first); a box is dropped when its IoU with a
    box already kept for its class exceeds the threshold."""
    nb, nc, n = scores.shape
    out = np.empty((nb * nc * min(n, max(max_per_class, 0)), 3), np.int64)
    count = 0
    kept = np.empty(n, np.int64)
    for b in range(nb):
        corners = np.empty((n, 4), boxes.dtype)
        for i in range(n):
            y0, x0, y1, x1 = _corners(boxes[b, i], center)
            corners[i, 0], corners[i, 1], corners[i, 2], corners[i, 3] = y0, x0, y1, x1
        for c in range(nc):
            s = scores[b, c]
            order = np.argsort(-s, kind="mergesort")
            nk = 0
            for t in range(n):
                if nk >= max_per_class:
                    break
                i = order[t]
                if use_score and not s[i] > score_threshold:
                    continue
                keep = True
                for q in range(nk):
                    j = kept[q]
                    iy0 = max(corners[i, 0], corners[j, 0])
                    ix0 = max(corners[i, 1], corners[j, 1])
                    iy1 = min(corners[i, 2], corners[j, 2])
                    ix1 = min(corners[i, 3], corners[j, 3])
                    if ix1 <= ix0 or iy1 <= iy0:
                        continue
                    inter = (ix1 - ix0) * (iy1 - iy0)
                    a1 = (corners[i, 2] - corners[i, 0]) * (corners[i, 3] - corners[i, 1])
                    a2 = (corners[j, 2] - corners[j, 0]) * (corners[j, 3] - corners[j, 1])
                    union = a1 + a2 - inter
                    if inter <= 0 or a1 <= 0 or a2 <= 0 or union <= 0:
                        continue
                    if inter / union > iou_threshold:
                        keep = False
                        break
                if keep:
                    kept[nk] = i
                    nk += 1
                    out[count, 0], out[count, 1], out[count, 2] = b, c, i
                    count += 1
    return out[:count].copy()


def non_max_suppression(boxes, scores, max_output=None, iou=None, score=None,
                        center_point_box=0):
    boxes = np.ascontiguousarray(boxes)
    scores = np.ascontiguousarray(scores, dtype=boxes.dtype)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
            or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise ValueError(f"NonMaxSuppression: boxes {list(boxes.shape)} and scores "
                         f"{list(scores.shape)} must be [batches, boxes, 4] and "
                         "[batches, classes, boxes]")
    max_per = 0 if max_output is None or np.size(max_output) == 0 else \
        int(np.asarray(max_output).reshape(-1)[0])
    t = boxes.dtype.type
    iou_t = t(0) if iou is None or np.size(iou) == 0 else t(np.asarray(iou).reshape(-1)[0])
    use_score = score is not None and np.size(score) != 0
    score_t = t(np.asarray(score).reshape(-1)[0]) if use_score else t(0)
    return nms(boxes, scores, max_per, iou_t, score_t, use_score, bool(center_point_box))


@njit(cache=True, no_cfunc_wrapper=True)
def unique_flat(x, keep_sorted):
    """Unique of a 1-D array: (values, first index, inverse, counts), sorted ascending or in
    order of first occurrence."""
    n = x.size
    order = np.argsort(x, kind="mergesort")
    group = np.empty(n, np.int64)      # group id per position in sorted order
    ng = 0
    for t in range(n):
        if t == 0 or x[order[t]] != x[order[t - 1]]:
            ng += 1
        group[t] = ng - 1
    first = np.full(ng, n, np.int64)
    counts = np.zeros(ng, np.int64)
    for t in range(n):
        g = group[t]
        counts[g] += 1
        if order[t] < first[g]:
            first[g] = order[t]
    rank = np.arange(ng)
    if not keep_sorted:
        by_first = np.argsort(first, kind="mergesort")
        rank = np.empty(ng, np.int64)
        for r in range(ng):
            rank[by_first[r]] = r
    values = np.empty(ng, x.dtype)
    idx = np.empty(ng, np.int64)
    cnt = np.empty(ng, np.int64)
    for g in range(ng):
        values[rank[g]] = x[first[g]]
        idx[rank[g]] = first[g]
        cnt[rank[g]] = counts[g]
    inverse = np.empty(n, np.int64)
    for t in range(n):
        inverse[order[t]] = rank[group[t]]
    return values, idx, inverse, cnt


def unique(x, axis=None, sorted=1):
    """ONNX Unique: (Y, indices, inverse_indices, counts)."""
    x = np.asarray(x)
    if axis is None:
        if x.dtype.kind in "fiub" and x.dtype.itemsize <= 8 and x.dtype != np.float16:
            return unique_flat(np.ascontiguousarray(x).reshape(-1), bool(sorted))
        flat = x.reshape(-1)
        y, idx, inv, cnt = np.unique(flat, True, True, True)
    else:
        # slices along an axis: numpy's unique over rows (not a compiled kernel)
        y, idx, inv, cnt = np.unique(x, True, True, True, axis=axis)
        axis = axis + x.ndim if axis < 0 else axis
    inv = inv.reshape(-1)
    if not sorted:
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        idx, cnt, inv = idx[order], cnt[order], rank[inv]
        y = np.take(x.reshape(-1) if axis is None else x, idx, axis=0 if axis is None else axis)
    return y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)
