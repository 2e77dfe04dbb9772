"""ai.onnx.ml ops over numeric tensors (tree ensembles: ml_trees.py)."""
from __future__ import annotations

import numpy as np

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
    return ctx.elementwise(f"({one} if {{0}} > {t} else {zero})", x, dtype=x.dtype)


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
