"""String ops: StringNormalizer, StringSplit, StringConcat, RegexFullMatch and Equal on strings.

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
