"""TfIdfVectorizer's kernel (lowered by ops/strings.py): n-gram counting over integer rows.

The n-grams of the pool are a trie built at prepare from the attributes and held as flat arrays:
node k's children are child_key / child_node[first[k]:first[k + 1]] (keys sorted, searched by
bisection), ngram[k] is the output column of the n-gram ending at node k (-1: none, a prefix
only). Counting follows onnx's reference and ONNX Runtime: for each skip distance
1..max_skip_count + 1 and each start, walk the trie along x[start], x[start + skip], ...;
unigrams are counted at the first skip distance only.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import JIT as _JIT
TF, IDF, TFIDF = 0, 1, 2


@njit(**_JIT)
def _child(first, child_key, child_node, node, key):
    lo, hi = first[node], first[node + 1]
    while lo < hi:
        mid = (lo + hi) // 2
        k = child_key[mid]
        if k < key:
            lo = mid + 1
        elif k > key:
            hi = mid
        else:
            return child_node[mid]
    return -1


@njit(**_JIT)
def tfidf(x, first, child_key, child_node, ngram, weights, min_gram, max_gram, max_skip,
          mode, width):
    """float32 [rows, width] of x [rows, C] (int32/int64 codes)."""
    rows, c = x.shape
    counts = np.zeros((rows, width), np.int64)
    if first[1] > first[0]:
        for r in range(rows):
            start_n = min_gram
            for skip in range(1, max_skip + 2):
                for start in range(c):
                    if start + skip * (start_n - 1) >= c:
                        break
                    node = 0
                    size = 1
                    item = start
                    while first[node + 1] > first[node] and size <= max_gram and item < c:
                        node = _child(first, child_key, child_node, node, np.int64(x[r, item]))
                        if node < 0:
                            break
                        col = ngram[node]
                        if size >= start_n and col >= 0:
                            counts[r, col] += 1
                        size += 1
                        item += skip
                if start_n == 1:
                    start_n += 1
                    if start_n > max_gram:
                        break
    out = np.empty((rows, width), np.float32)
    has_w = weights.shape[0] > 0
    for r in range(rows):
        for i in range(width):
            f = counts[r, i]
            if mode == TF:
                out[r, i] = np.float32(f)
            elif mode == IDF:
                if f > 0:
                    out[r, i] = weights[i] if has_w else np.float32(1)
                else:
                    out[r, i] = np.float32(0)
            else:
                out[r, i] = weights[i] * np.float32(f) if has_w else np.float32(f)
    return out
