"""String ops: StringNormalizer, StringSplit, StringConcat, RegexFullMatch and Equal on strings;
TfIdfVectorizer (compiled, at the end).

Numba holds no string tensors, so these are host nodes the staged driver runs in Python between
compiled segments (staged.STRING_OPS, host_ops.py): string tensors are numpy object arrays of
Python `str`, worked on with Python's str methods. They count as Python segments in the
conformance report. Nothing from the model (attributes, strings) reaches generated source.

- StringNormalizer follows the ONNX spec and ONNX Runtime: stopwords remove whole elements of a
  [C] or [1, C] input (compared case-insensitively unless is_case_sensitive), then LOWER / UPPER
  / NONE; an input left empty gives [""] / [[""]]. Case changes are Python's Unicode
  str.lower / str.upper (the `locale` attribute is accepted but not used). Accents are kept (the
  onnx reference strips them; ORT does not).
- RegexFullMatch runs the model's pattern with Python's `re.fullmatch`: the pattern is data, not
  code, so it is safe to run, but `re` backtracks: a pathological pattern (catastrophic
  backtracking, e.g. "(a+)+$") can take exponential time on a crafted input; guarding against
  that is out of scope. The spec names re2 syntax; `re` accepts a superset of it.
"""
from __future__ import annotations

import operator
import re

import numpy as np

from ..host_ops import host
from ..registry import register
from .movement import reshape

_CONCAT = np.frompyfunc(operator.add, 2, 1)
_EQUAL = np.frompyfunc(operator.eq, 2, 1)


def _strings(ctx, x, what="input"):
    x = np.asarray(x)
    if x.dtype.kind in "US":
        x = x.astype(str).astype(object)
    if x.dtype != object:
        ctx.fail(f"{what} must be a string tensor, got {x.dtype}")
    if not all(isinstance(s, str) for s in x.flat):
        ctx.fail(f"{what} must hold strings")
    return x


@host("StringNormalizer")
def string_normalizer(ctx, x, case_change_action="NONE", is_case_sensitive=0, locale=None,
                      stopwords=None):
    x = _strings(ctx, x)
    if case_change_action not in ("NONE", "LOWER", "UPPER"):
        ctx.fail(f"case_change_action={case_change_action!r} is not NONE, LOWER or UPPER")
    change = {"NONE": None, "LOWER": str.lower, "UPPER": str.upper}[case_change_action]
    if stopwords:
        if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
            ctx.fail(f"with stopwords the input must be [C] or [1, C], got {list(x.shape)}")
        if is_case_sensitive:
            stops = set(stopwords)
            kept = [s for s in x.ravel() if s not in stops]
        else:
            stops = {w.lower() for w in stopwords}
            kept = [s for s in x.ravel() if s.lower() not in stops]
        if not kept:
            kept = [""]
        x = np.array(kept, dtype=object).reshape((1, -1) if x.ndim == 2 else (-1,))
    elif x.ndim not in (1, 2):
        ctx.fail(f"the input must be [C] or [N, C], got {list(x.shape)}")
    if change is not None:
        out = np.empty(x.shape, dtype=object)
        out.ravel()[:] = [change(s) for s in x.ravel()]
        x = out
    return [x]


@host("StringSplit")
def string_split(ctx, x, delimiter=None, maxsplit=None):
    x = _strings(ctx, x)
    sep = delimiter or None            # "" or absent: split on runs of whitespace
    limit = -1 if maxsplit is None else int(maxsplit)
    if limit < -1:
        ctx.fail(f"maxsplit={limit} must be non-negative")
    parts = [s.split(sep, limit) for s in x.ravel()]
    width = max((len(p) for p in parts), default=0)
    y = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        y[i, :len(p)] = p
    counts = np.array([len(p) for p in parts], np.int64).reshape(x.shape)
    return [y.reshape(x.shape + (width,)), counts]


@host("StringConcat")
def string_concat(ctx, x, y):
    x, y = _strings(ctx, x, "X"), _strings(ctx, y, "Y")
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        ctx.fail(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast")
    return [np.asarray(_CONCAT(x, y), dtype=object).reshape(shape)]


@host("RegexFullMatch")
def regex_full_match(ctx, x, pattern=None):
    x = _strings(ctx, x)
    if pattern is None:
        ctx.fail("the pattern attribute is required")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        ctx.fail(f"invalid regex pattern {pattern!r}: {exc}")
    out = np.fromiter((regex.fullmatch(s) is not None for s in x.ravel()), bool, x.size)
    return [out.reshape(x.shape)]


@host("Equal")
def equal(ctx, a, b):
    """Equal on strings (a host node only where an input is a string tensor: staged.py)."""
    a, b = np.asarray(a), np.asarray(b)
    if (a.dtype.kind in "OUS") != (b.dtype.kind in "OUS"):
        ctx.fail(f"compares {a.dtype} with {b.dtype}")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        ctx.fail(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast")
    return [np.asarray(_EQUAL(a, b), dtype=bool).reshape(shape)]


# -- TfIdfVectorizer: compiled (kernels/tfidf.py) ------------------------------------------------
def _ngram_trie(ctx, pool, ngram_counts, min_gram, max_gram, columns):
    """The pool's n-grams (sizes min_gram..max_gram) as a trie in flat arrays (kernels/tfidf.py),
    built as onnx's reference and ORT build theirs: n-gram ids count every n-gram of the pool
    in order, id i being output column ngram_indexes[i]."""
    root = [-1, {}]
    ngram_id, starts = 0, list(ngram_counts) + [len(pool)]
    for size, (lo, hi) in enumerate(zip(starts[:-1], starts[1:]), start=1):
        if hi < lo or lo < 0 or hi > len(pool) or (hi - lo) % size:
            ctx.fail(f"ngram_counts {list(ngram_counts)} do not cut the pool of {len(pool)} "
                     f"into {size}-grams")
        for k in range(lo, hi, size):
            if min_gram <= size <= max_gram:
                node = root
                for key in pool[k:k + size]:
                    node = node[1].setdefault(key, [-1, {}])
                if ngram_id >= len(columns):
                    ctx.fail(f"{ngram_id + 1} n-grams, {len(columns)} ngram_indexes")
                node[0] = int(columns[ngram_id])
            ngram_id += 1
    nodes, first, keys, children = [root], [0], [], []
    for node in nodes:           # breadth first: node k's children get the next ids
        for key in sorted(node[1]):
            keys.append(key)
            children.append(len(nodes))
            nodes.append(node[1][key])
        first.append(len(keys))
    return (np.asarray(first[:len(nodes) + 1], np.int64), np.asarray(keys, np.int64),
            np.asarray(children, np.int64), np.asarray([n[0] for n in nodes], np.int64))


@register("TfIdfVectorizer", 9)
def TfIdfVectorizer(ctx, x, max_gram_length=None, max_skip_count=None, min_gram_length=None,
                    mode=None, ngram_counts=None, ngram_indexes=None, pool_int64s=None,
                    pool_strings=None, weights=None):
    """float32 [width] ([B, width] for a [B, C] input) n-gram counts (TF), 0/1 presence times
    the weights (IDF) or counts times the weights (TFIDF); the i-th weight is the i-th
    n-gram's, as the spec and ORT read it (onnx's reference takes it as column i's). The n-gram trie is built here from
    the attributes; counting is compiled. A string input (pool_strings) is turned into int64
    codes (the string's index in the pool, -1 for none) in Python before the compiled graph."""
    modes = {"TF": 0, "IDF": 1, "TFIDF": 2}
    if mode not in modes:
        ctx.fail(f"mode={mode!r} is not TF, IDF or TFIDF")
    if None in (max_gram_length, max_skip_count, min_gram_length) or not ngram_indexes:
        ctx.fail("max_gram_length, max_skip_count, min_gram_length and ngram_indexes are "
                 "required")
    if not 1 <= min_gram_length <= max_gram_length or max_skip_count < 0:
        ctx.fail(f"min_gram_length={min_gram_length}, max_gram_length={max_gram_length}, "
                 f"max_skip_count={max_skip_count} are out of range")
    if bool(pool_int64s) == bool(pool_strings):
        ctx.fail("exactly one of pool_int64s and pool_strings is required")
    if x.rank > 2:
        ctx.fail(f"the input must be [C] or [B, C], got rank {x.rank}")
    columns = [int(i) for i in ngram_indexes]
    if min(columns) < 0:
        ctx.fail("ngram_indexes must be non-negative")
    width = max(columns) + 1
    w = np.asarray(weights if weights else [], np.float32)
    if w.size:    # the i-th weight is the i-th n-gram's (spec, ORT): as a weight per column
        if w.size != len(columns):
            ctx.fail(f"{w.size} weights for {len(columns)} ngram_indexes")
        per_column = np.zeros(width, np.float32)
        per_column[columns] = w
        w = per_column
    if pool_strings:
        index = {}
        for s in pool_strings:
            index.setdefault(s, len(index))
        pool = [index[s] for s in pool_strings]
        if x.dtype != object:
            ctx.fail(f"pool_strings with a {x.dtype} input")
        get = index.get

        def codes(strings):
            return np.fromiter((get(s, -1) for s in strings.ravel()), np.int64,
                               strings.size).reshape(strings.shape)
        x = ctx.python_input(x, codes, x.shape, np.int64)
    else:
        if x.dtype not in (np.int32, np.int64):
            ctx.fail(f"pool_int64s with a {x.dtype} input (int32 or int64 expected)")
        pool = [int(v) for v in pool_int64s]
    first, keys, children, ngram = _ngram_trie(ctx, pool, ngram_counts or [0], min_gram_length,
                                               max_gram_length, columns)
    rows = reshape(ctx, x, (1, x.size)) if x.rank < 2 else x
    tables = (first, keys, children, ngram, w)
    out = ctx.kernel(("tfidf", "tfidf"), rows, *map(ctx.constant, tables), int(min_gram_length),
                     int(max_gram_length), int(max_skip_count), modes[mode], width,
                     shape=(rows.shape[0], width), dtype=np.float32)
    return reshape(ctx, out, (width,)) if x.rank < 2 else out
