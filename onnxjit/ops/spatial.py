"""Spatial sampling ops: GridSample, AffineGrid, RoiAlign, LpPool (kernels in kernels/spatial.py).

Semantics follow onnx/reference/ops (op_grid_sample.py, op_affine_grid.py, op_roi_align.py) and
the LpPool backend test cases (sum of |x|^p over the window's valid taps, then the p-th root).
"""
import math

import numpy as np

from ..errors import LimitError
from ..kernels import pool, shapes
from .nn import as5, pool_geometry, view
from .. import scalar_expr as S
from .. import steps as E
from ..registry import register
from ..validate import current_limit

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_GS_MODES = {"nearest": 0, "linear": 1, "bilinear": 1, "cubic": 2, "bicubic": 2}
_GS_PADDING = {"zeros": 0, "border": 1, "reflection": 2}


def _float_only(ctx, *values):
    for v in values:
        if v is not None and v.dtype not in _FLOATS:
            ctx.fail(f"only float32/float64 inputs are supported, got {v.dtype}")


def _choice(ctx, name, value, table):
    if value not in table:
        ctx.fail(f"unsupported {name} (expected one of {', '.join(table)})")
    return table[value]


def _grid_sample(ctx, x, grid, mode, padding_mode, align_corners, max_rank):
    """GridSample over any number of spatial dims, in float64, cast to x's dtype."""
    _float_only(ctx, grid)
    k = x.rank - 2
    if not 1 <= k <= max_rank - 2 or grid.rank != x.rank or grid.shape[0] != x.shape[0] \
            or grid.shape[-1] != k:
        ctx.fail(f"X {list(x.shape)} and grid {list(grid.shape)} do not match "
                 f"(grid must be (N, *out, {k}))")
    m = _choice(ctx, "mode", mode, _GS_MODES)
    pad = _choice(ctx, "padding_mode", padding_mode, _GS_PADDING)
    n, c, dims, out = x.shape[0], x.shape[1], x.shape[2:], grid.shape[1:-1]
    # dims as an array: the kernel indexes it with a loop variable (a tuple of literals cannot be)
    sizes = ctx.constant(np.array(dims, np.int64))
    expr = E.lib("spatial", "grid_sample", E.reshape(x, (n, c, math.prod(dims))),
                 E.reshape(grid, (n, math.prod(out), k)), sizes, m, pad,
                 int(bool(align_corners)), int(grid.dtype == np.float32))
    return ctx.call(expr.reshape((n, c) + tuple(out)), x, grid, sizes,
                    shape=(n, c) + tuple(out), dtype=x.dtype)


@register("GridSample", 16)
def GridSample16(ctx, x, grid, align_corners=0, mode="bilinear", padding_mode="zeros"):
    return _grid_sample(ctx, x, grid, mode, padding_mode, align_corners, 4)


@register("GridSample", 20)
def GridSample20(ctx, x, grid, align_corners=0, mode="linear", padding_mode="zeros"):
    return _grid_sample(ctx, x, grid, mode, padding_mode, align_corners, 5)


def _base_axis(n, align_corners):
    """The normalized sample positions along one output axis (as onnx's reference builds them)."""
    if n <= 1:
        return np.zeros(n)
    if align_corners:
        a = np.arange(-1, 1 + 0.0001, 2.0 / (n - 1))
    else:
        step = 2.0 / n
        a = np.arange(-1 + step / 2, 1, step)
    return a[:n]


def affine_base(spatial, align_corners):
    """(prod(spatial), k + 1) homogeneous coordinates, innermost dim first, then 1."""
    axes = [_base_axis(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(spatial))]
    return np.stack(cols, axis=1).astype(np.float64)


@register("AffineGrid", 20)
def AffineGrid(ctx, theta, size, align_corners=0):
    _float_only(ctx, theta)
    dims = [int(d) for d in np.asarray(ctx.require_const(size, "size")).reshape(-1)]
    k = len(dims) - 2
    if k not in (2, 3) or theta.shape != (dims[0], k, k + 1) or min(dims) < 0:
        ctx.fail(f"theta {list(theta.shape)} does not match size {dims} "
                 "(expected (N, 2, 3) with a 4-D size or (N, 3, 4) with a 5-D size)")
    base = ctx.constant(affine_base(dims[2:], align_corners))
    shape = (dims[0],) + tuple(dims[2:]) + (k,)
    expr = E.lib("spatial", "affine_grid", theta, base).reshape(shape)
    return ctx.call(expr, theta, base, shape=shape, dtype=theta.dtype)


def _roi_align(ctx, x, rois, batch, ctm, mode, oh, ow, sampling_ratio, scale):
    _float_only(ctx, x, rois)
    half = _choice(ctx, "coordinate_transformation_mode", ctm,
                   {"half_pixel": True, "output_half_pixel": False})
    mode_max = _choice(ctx, "mode", mode, {"avg": False, "max": True})
    r = rois.shape[0] if rois.rank == 2 else -1
    if x.rank != 4 or rois.shape != (r, 4) or batch.shape != (r,) or oh < 1 or ow < 1:
        ctx.fail(f"X {list(x.shape)}, rois {list(rois.shape)} and batch_indices "
                 f"{list(batch.shape)} do not match (expected 4-D X, (R, 4) rois, (R,) indices)")
    if batch.dtype.kind not in "iu":
        ctx.fail("batch_indices must be integers")
    # sampling_ratio**2 bilinear samples per output element (and scratch for them): bounded
    # like a tensor's elements (0 or less: adaptive, from each roi's size, as the reference)
    work = max(int(sampling_ratio), 0) ** 2 * max(r, 1) * x.shape[1] * oh * ow
    most = current_limit()
    if work > most:
        raise LimitError(f"{ctx.node.op_type} node {ctx.node.name!r}: sampling_ratio="
                         f"{sampling_ratio} asks for {work:,} samples ({sampling_ratio}**2 per "
                         f"output element), over the element limit of {most:,} "
                         "(prepare(max_elements=...) or ONNXJIT_MAX_ELEMENTS)")
    return ctx.kernel(("spatial", "roi_align"), x, rois, batch, int(oh), int(ow),
                      int(sampling_ratio), float(scale), half, mode_max, most,
                      shape=(r, x.shape[1], oh, ow), dtype=x.dtype)


@register("RoiAlign", 10)
def RoiAlign10(ctx, x, rois, batch_indices, mode="avg", output_height=1, output_width=1,
               sampling_ratio=0, spatial_scale=1.0):
    return _roi_align(ctx, x, rois, batch_indices, "output_half_pixel", mode, output_height,
                      output_width, sampling_ratio, spatial_scale)


@register("RoiAlign", 16)
def RoiAlign16(ctx, x, rois, batch_indices, coordinate_transformation_mode="half_pixel",
               mode="avg", output_height=1, output_width=1, sampling_ratio=0, spatial_scale=1.0):
    return _roi_align(ctx, x, rois, batch_indices, coordinate_transformation_mode, mode,
                      output_height, output_width, sampling_ratio, spatial_scale)


@register("LpPool", 2)
def LpPool(ctx, x, auto_pad="NOTSET", ceil_mode=0, dilations=None, kernel_shape=None, p=2,
           pads=None, strides=None):
    """(sum of |x|^p over the window's taps inside the input) ** (1/p), via AveragePool's kernel."""
    _float_only(ctx, x)
    if kernel_shape is None or x.rank < 3 or len(kernel_shape) != x.rank - 2 or p <= 0:
        ctx.fail("LpPool needs kernel_shape for every spatial dim and p > 0")
    kernel = tuple(int(k) for k in kernel_shape)
    s, pd, d, out = pool_geometry(ctx, x, kernel, auto_pad, strides, dilations, pads, ceil_mode)
    pv = ctx.scalar(float(p), x.dtype)
    powered = ctx.elementwise(S.builtin("abs", S.operand(0)) ** pv, x, dtype=x.dtype)
    # count_include_pad=1 divides every full window by the kernel size: times it gives the sum
    kind = pool.scheme(x.shape, x.dtype, kernel, s, pd, d, out, ctx.target)
    shape = x.shape[:2] + tuple(out)
    mean = view(ctx, ctx.kernel(("pool", f"avgpool_{kind}"), as5(ctx, powered),
                                *shapes.window3(kernel, s, pd, d, out), 1,
                                shape=shapes.shape5(shape), dtype=x.dtype), shape)
    count, inv = ctx.scalar(float(math.prod(kernel)), x.dtype), ctx.scalar(1.0 / p, x.dtype)
    return ctx.elementwise((S.operand(0) * count) ** inv, mean, dtype=x.dtype)


@register("DeformConv", 19)
def DeformConv(ctx, x, w, offset, b=None, mask=None, dilations=None, group=1, kernel_shape=None,
               offset_group=1, pads=None, strides=None):
    """2-D deformable convolution: sampled im2col columns times the grouped weights."""
    _float_only(ctx, x, w, offset, b, mask)
    if any(v is not None and v.dtype != x.dtype for v in (w, offset, b, mask)):
        ctx.fail("X, W, offset, B and mask must share one dtype")
    if x.rank != 4 or w.rank != 4 or offset.rank != 4:
        ctx.fail("only 2-D DeformConv (4-D X, W and offset) is supported")
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    if kernel_shape is not None and tuple(kernel_shape) != (kh, kw):
        ctx.fail("kernel_shape does not match W")
    sh, sw = strides or (1, 1)
    dh, dw = dilations or (1, 1)
    p = tuple(pads or (0, 0, 0, 0))
    oh = (h + p[0] + p[2] - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + p[1] + p[3] - (kw - 1) * dw - 1) // sw + 1
    taps = offset_group * kh * kw
    if group < 1 or c != cg * group or m % group or offset_group < 1 or c % offset_group \
            or offset.shape != (n, 2 * taps, oh, ow):
        ctx.fail(f"X {list(x.shape)}, W {list(w.shape)} and offset {list(offset.shape)} do not "
                 f"match group={group}, offset_group={offset_group} and the geometry")
    if mask is not None and mask.shape != (n, taps, oh, ow) or b is not None and b.shape != (m,):
        ctx.fail("B must be (M,) and mask (N, offset_group*kh*kw, oh, ow)")
    b = b if b is not None else ctx.constant(np.zeros(m, x.dtype))
    mask = mask if mask is not None else ctx.constant(np.ones((n, taps, oh, ow), x.dtype))
    geo = (kh, kw, sh, sw, p[0], p[1], dh, dw)
    return ctx.kernel(("spatial", "deform_conv"), x, w, offset, b, mask, geo, int(group),
                      int(offset_group), shape=(n, m, oh, ow), dtype=x.dtype)
