"""Resize and Upsample: per-axis index/weight tables built at compile time (numpy), applied by
one generic separable kernel (onnxjit/kernels/resize.py).

The tables follow onnx/reference/ops/op_resize.py: each output coordinate maps to a source
coordinate (coordinate_transformation_mode), the `n` nearest source indices (edge-clamped)
and their coefficients (nearest / linear / cubic, optionally antialiased).
"""
import math

import numpy as np

from .. import validate
from .. import scalar_expr as S
from .. import steps as E
from ..registry import register

_CTMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
         "asymmetric", "tf_crop_and_resize")
# "simple" is internal only (Upsample, Resize-10): the Resize-11+ lowerings refuse it.
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _source_coords(ctm, out_w, scale, in_w, roi):
    """(x_ori, extrapolated mask) for output positions 0..out_w-1 along one axis."""
    y = np.arange(out_w, dtype=np.float64)
    width = scale * in_w   # the real-valued output width
    mask = np.zeros(out_w, dtype=bool)
    if ctm == "align_corners":
        x = np.zeros(out_w) if width == 1 else y * (in_w - 1) / (width - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        if width == 1:
            x = np.full(out_w, (roi[1] - roi[0]) * (in_w - 1) / 2, dtype=np.float64)
        else:
            x = y * (roi[1] - roi[0]) * (in_w - 1) / (width - 1)
        x = x + roi[0] * (in_w - 1)
        mask = (x < 0) | (x > in_w - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(out_w, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric
        offset = in_w / 2 * (1 - out_w / width)
        x = offset + (y + 0.5) / scale - 0.5
    return np.asarray(x, dtype=np.float64), mask


def _nearest_coeffs(ratio, scale, nearest_mode):
    if float(ratio).is_integer():
        return np.array([0.0, 1.0])
    if nearest_mode == "simple":   # Upsample / Resize-10: floor when upsampling, ceil when down
        nearest_mode = "ceil" if scale < 1 else "floor"
    up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
          "floor": False, "ceil": True}[nearest_mode]
    return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])


def _linear_coeffs(ratio, scale, antialias):
    if not antialias:
        return np.array([1 - ratio, ratio])
    scale = min(scale, 1.0)
    start = int(np.floor(-1 / scale) + 1)
    args = (np.arange(start, 2 - start) - ratio) * scale
    coeffs = np.clip(1 - np.abs(args), 0, 1)
    return coeffs / coeffs.sum()


def _cubic_coeffs(ratio, scale, a, antialias):
    """Keys cubic weights; `a` is the float32 attribute, so (as in onnx's reference and ORT)
    the arithmetic runs in float32."""
    ratio = float(ratio)
    if not antialias:
        r = 1 - ratio
        return np.array([((a * (ratio + 1) - 5 * a) * (ratio + 1) + 8 * a) * (ratio + 1) - 4 * a,
                         ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
                         ((a + 2) * r - (a + 3)) * r * r + 1,
                         ((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a])
    scale = min(scale, 1.0)
    start = int(np.floor(-2 / scale) + 1)
    coeffs = np.array([_cubic_weight(abs(scale * (i - ratio)), a) for i in range(start, 2 - start)])
    return coeffs / sum(coeffs)


def _cubic_weight(x, a):
    x2 = x * x
    x3 = x * x2
    if x <= 1:
        return (a + 2) * x3 - (a + 3) * x2 + 1
    if x < 2:
        return a * x3 - 5 * a * x2 + 8 * a * x - 4 * a
    return a * 0.0


def _neighbours(x, n, in_w):
    """The n source indices nearest x (ties to the smaller), edge-clamped, and unclamped."""
    pad = int(np.ceil(n / 2))
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        start = p + np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        start = p + np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    raw = start[:, None] + np.arange(n)[None, :] - pad
    return np.clip(raw, 0, in_w - 1), raw


def axis_table(opts, in_w, out_w, scale, roi):
    """(idx (out_w, n), coef (out_w, n), extrapolated (out_w,)) for one resized axis."""
    x, mask = _source_coords(opts["ctm"], out_w, scale, in_w, roi)
    xi = np.floor(x)
    ratios = np.where(x == xi, 1.0, x - xi)
    mode = opts["mode"]
    if mode == "nearest":
        coef = np.stack([_nearest_coeffs(r, scale, opts["nearest_mode"]) for r in ratios])
    elif mode == "linear":
        coef = np.stack([_linear_coeffs(r, scale, opts["antialias"]) for r in ratios])
    else:
        coef = np.stack([_cubic_coeffs(r, scale, opts["a"], opts["antialias"]) for r in ratios])
    coef = coef.reshape(out_w, -1)
    idx, raw = _neighbours(x, coef.shape[1], in_w)
    if opts["exclude_outside"]:
        coef = np.where((raw < 0) | (raw >= in_w), 0.0, coef)
        total = coef.sum(axis=1, keepdims=True)
        coef = coef / np.where(total == 0, 1.0, total)
    if mode == "nearest":   # one-hot weights: keep the chosen index only (no 0 * inf)
        idx = idx[np.arange(out_w), np.argmax(coef, axis=1)][:, None]
        coef = np.ones((out_w, 1))
    return idx.astype(np.int64), coef.astype(np.float64), mask


def _check_choice(ctx, name, value, choices):
    if value not in choices:
        ctx.fail(f"unsupported {name} (expected one of {', '.join(choices)})")


def _output_geometry(ctx, x, scales, sizes, axes, policy):
    """(scale per axis, output size per axis) over the resized `axes`."""
    in_w = [x.shape[a] for a in axes]
    if sizes is not None:
        sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
        if len(sizes) != len(axes) or min(sizes, default=0) < 0:
            ctx.fail(f"sizes must hold {len(axes)} non-negative values")
        scales = [o / i if i else 1.0 for o, i in zip(sizes, in_w)]
        if policy != "stretch":
            scale = (min if policy == "not_larger" else max)(scales)
            scales = [scale] * len(axes)
            sizes = [int(scale * i + 0.5) for i in in_w]
        _check_sizes(ctx, x, axes, sizes)
        return scales, sizes
    scales = [float(s) for s in np.asarray(scales).reshape(-1)]
    if len(scales) != len(axes) or not all(s > 0 and math.isfinite(s) for s in scales):
        ctx.fail(f"scales must hold {len(axes)} positive values")
    wide = [np.float64(s) * i for s, i in zip(scales, in_w)]
    if not all(math.isfinite(w) for w in wide):
        ctx.fail(f"scales {scales} give an output size past any float")
    sizes = [int(w) for w in wide]
    _check_sizes(ctx, x, axes, sizes)
    return scales, sizes


def _check_sizes(ctx, x, axes, sizes):
    """The output shape under the element limit (LimitError) before any table is built."""
    shape = list(x.shape)
    for a, n in zip(axes, sizes):
        shape[a] = n
    validate.check_shape(ctx.node, ctx.node.output[0] if ctx.node.output else "", shape)


def _roi_pairs(ctx, roi_v, axes, rank, opts):
    """Per resized axis the (start, end) roi pair, or None outside tf_crop_and_resize."""
    if opts["ctm"] != "tf_crop_and_resize":
        return [None] * len(axes)
    if roi_v is None:
        ctx.fail("tf_crop_and_resize needs the roi input")
    roi = np.asarray(ctx.require_const(roi_v, "roi")).reshape(-1)
    k = len(axes) if roi.size == 2 * len(axes) else rank
    if roi.size != 2 * k:
        ctx.fail(f"roi must hold {2 * len(axes)} values")
    pos = range(len(axes)) if k == len(axes) else axes
    return [(roi[i], roi[k + i]) for i in pos]


def _is_identity(scale, in_w, out_w, roi):
    same_roi = roi is None or (math.isclose(float(roi[0]), 0.0) and math.isclose(float(roi[1]), 1.0))
    return math.isclose(scale, 1.0) and in_w == out_w and same_roi


def _tables(ctx, x, axes, scales, sizes, rois, opts):
    """(plan rows, idx, coef, mask, output shape) for the axes that really change."""
    shape = list(x.shape)
    plan, idx, coef, mask = [], [], [], []
    toff = moff = 0
    order = list(zip(axes, scales, sizes, rois))
    # An upsampled last axis first: its pass is a gather per output element (no inner run to
    # vectorize), cheapest on the smaller tensor; the other axes then run over whole rows.
    first = [i for i, e in enumerate(order) if e[0] == len(shape) - 1 and e[2] > shape[e[0]]]
    order = [order[i] for i in first] + [e for i, e in enumerate(order) if i not in first]
    for a, scale, out_w, roi in order:
        in_w = shape[a]
        if _is_identity(scale, in_w, out_w, roi):
            continue
        if in_w == 0 or out_w == 0:
            ctx.fail(f"cannot resize axis {a} from {in_w} to {out_w} elements (an empty axis)")
        i, c, m = axis_table(opts, in_w, out_w, scale, roi)
        outer, inner = math.prod(shape[:a]), math.prod(shape[a + 1:])
        plan.append((outer, in_w, out_w, inner, c.shape[1], toff, moff))
        idx.append(i.reshape(-1)), coef.append(c.reshape(-1)), mask.append(m)
        toff, moff = toff + i.size, moff + out_w
        shape[a] = out_w
    return plan, idx, coef, mask, tuple(shape)


def _saturate(value, dtype):
    """A float cast to dtype as onnx's reference does (round and clip for integers)."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return dtype.type(np.clip(np.round(value), info.min, info.max))
    return dtype.type(value)


def resize(ctx, x, roi_v, scales_v, sizes_v, opts, axes=None, policy="stretch"):
    """Lower one Resize/Upsample node once its inputs and options are known."""
    _check_choice(ctx, "mode", opts["mode"], ("nearest", "linear", "cubic"))
    _check_choice(ctx, "coordinate_transformation_mode", opts["ctm"], _CTMS)
    _check_choice(ctx, "nearest_mode", opts["nearest_mode"], _NEAREST)
    _check_choice(ctx, "keep_aspect_ratio_policy", policy, ("stretch", "not_larger", "not_smaller"))
    if x.dtype == np.bool_ and opts["mode"] != "nearest":
        ctx.fail("linear and cubic modes need a numeric input")
    axes = list(range(x.rank)) if axes is None else [int(a) + x.rank if a < 0 else int(a) for a in axes]
    if sorted(set(axes)) != sorted(axes) or not all(0 <= a < x.rank for a in axes):
        ctx.fail("axes must be distinct and within the input's rank")
    sizes = None if sizes_v is None or sizes_v.size == 0 else ctx.require_const(sizes_v, "sizes")
    scales = None
    if sizes is None:
        if scales_v is None or scales_v.size == 0:
            ctx.fail("one of scales and sizes must be given")
        scales = ctx.require_const(scales_v, "scales")
    scales, sizes = _output_geometry(ctx, x, scales, sizes, axes, policy)
    rois = _roi_pairs(ctx, roi_v, axes, x.rank, opts)
    plan, idx, coef, mask, shape = _tables(ctx, x, axes, scales, sizes, rois, opts)
    return _emit(ctx, x, plan, idx, coef, mask, shape, opts)


def _bilinear_planes(x, plan, mask, shape, opts):
    """Whether kernels/resize.bilinear_planes_f32 applies (a linear Resize of a float32
    (N, C, H, W) over H and W, 2 taps per output, no tf_crop_and_resize extrapolation): then
    whether the plan resizes W first (True) or H first (False); else None."""
    if opts["mode"] != "linear" or x.dtype != np.float32:
        return None
    return _planes_order(x, plan, mask, shape, 2)


def _planes_order(x, plan, mask, shape, taps):
    """For an (N, C, H, W) x resized over H and W by `taps`-entry tables with no
    tf_crop_and_resize extrapolation: whether the plan resizes W first (True) or H first
    (False); None for any other plan."""
    if (x.rank != 4 or len(plan) != 2 or any(row[4] != taps for row in plan)
            or any(np.any(m) for m in mask) or x.dtype == object):
        return None
    (n, c, h, w), (oh, ow) = x.shape, shape[2:]
    if shape[:2] != (n, c):
        return None
    if plan[0][:4] == (n * c * h, w, ow, 1) and plan[1][:4] == (n * c, h, oh, ow):
        return True
    if plan[0][:4] == (n * c, h, oh, w) and plan[1][:4] == (n * c * oh, w, ow, 1):
        return False
    return None


def _emit(ctx, x, plan, idx, coef, mask, shape, opts):
    """The kernel call applying the tables (or x itself / an empty array)."""
    if math.prod(shape) == 0:
        return ctx.constant(np.zeros(shape, x.dtype))
    if not plan:
        return x
    tables = [ctx.constant(np.asarray(plan, np.int64)), ctx.constant(np.concatenate(idx)),
              ctx.constant(np.concatenate(mask).astype(np.uint8))]
    ext = opts["extrapolation"]
    order = _planes_order(x, plan, mask, shape, 1)
    if opts["mode"] == "nearest" and order is not None:
        # (N, C, H, W) resized over H and W: rows gathered (or copied) plane by plane, threads
        hrow, wrow = (1, 0) if order else (0, 1)
        return ctx.kernel(("resize", "nearest_planes"), x, ctx.constant(idx[hrow]),
                          ctx.constant(idx[wrow]), int(shape[2]), int(shape[3]), shape=shape,
                          dtype=x.dtype)
    if opts["mode"] == "nearest":
        return ctx.kernel(("resize", "nearest"), x, *tables,
                          E.scalar(_saturate(ext, x.dtype), x.dtype), shape, shape=shape,
                          dtype=x.dtype)
    planes = _bilinear_planes(x, plan, mask, shape, opts)
    if planes is not None:
        # float32 NCHW resized over H and W by 2-tap tables: plane by plane, on threads
        w_first = planes
        hrow, wrow = (1, 0) if w_first else (0, 1)
        return ctx.kernel(("resize", "bilinear_planes_f32"), x, ctx.constant(idx[hrow]),
                          ctx.constant(coef[hrow].astype(np.float32)), ctx.constant(idx[wrow]),
                          ctx.constant(coef[wrow].astype(np.float32)), int(shape[2]),
                          int(shape[3]), bool(w_first), shape=shape, dtype=np.float32)
    if x.dtype == np.float32:
        # float32 in and out, float32 weights (no float64 copy and cast pass)
        weights = ctx.constant(np.concatenate(coef).astype(np.float32))
        expr = E.lib("resize", "interpolate_f32", x, tables[0], tables[1], weights, tables[2],
                     E.scalar(float(ext), np.float64))
        return ctx.call(expr.reshape(shape), x, *tables, weights, shape=shape, dtype=np.float32)
    weights = ctx.constant(np.concatenate(coef))
    expr = E.lib("resize", "interpolate", x, tables[0], tables[1], weights, tables[2],
                 E.scalar(float(ext), np.float64))
    y = ctx.call(expr.reshape(shape), x, *tables, weights, shape=shape, dtype=np.float64)
    if np.issubdtype(x.dtype, np.integer):
        info = np.iinfo(x.dtype)
        lo, hi = ctx.lit(float(info.min)), ctx.lit(float(info.max))
        rounded = S.np("rint", S.operand(0))
        return ctx.elementwise(S.builtin("min", S.builtin("max", rounded, lo), hi), y,
                               dtype=x.dtype)
    return y if x.dtype == np.float64 else ctx.elementwise(S.operand(0), y, dtype=x.dtype)


def _opts(mode, ctm="half_pixel", nearest_mode="round_prefer_floor", a=-0.75, exclude_outside=0,
          extrapolation=0.0, antialias=0):
    return dict(mode=mode, ctm=ctm, nearest_mode=nearest_mode, a=np.float32(a),
                exclude_outside=bool(exclude_outside), extrapolation=float(extrapolation),
                antialias=bool(antialias))


@register("Upsample", 7)
def Upsample7(ctx, x, mode="nearest", scales=None):
    if scales is None:
        ctx.fail("the scales attribute is required")
    return resize(ctx, x, None, ctx.constant(np.asarray(scales, np.float32)), None,
                  _opts(mode, "asymmetric", "simple"))


@register("Upsample", 9)
def Upsample9(ctx, x, scales, mode="nearest"):
    return resize(ctx, x, None, scales, None, _opts(mode, "asymmetric", "simple"))


@register("Resize", 10)
def Resize10(ctx, x, scales, mode="nearest"):
    return resize(ctx, x, None, scales, None, _opts(mode, "asymmetric", "simple"))


@register("Resize", 11)
def Resize11(ctx, x, roi=None, scales=None, sizes=None, coordinate_transformation_mode="half_pixel",
             cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0, mode="nearest",
             nearest_mode="round_prefer_floor"):
    _check_choice(ctx, "nearest_mode", nearest_mode, _NEAREST[:4])
    opts = _opts(mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
                 exclude_outside, extrapolation_value)
    return resize(ctx, x, roi, scales, sizes, opts)


@register("Resize", 18)
def Resize18(ctx, x, roi=None, scales=None, sizes=None, antialias=0, axes=None,
             coordinate_transformation_mode="half_pixel", cubic_coeff_a=-0.75, exclude_outside=0,
             extrapolation_value=0.0, keep_aspect_ratio_policy="stretch", mode="nearest",
             nearest_mode="round_prefer_floor"):
    _check_choice(ctx, "nearest_mode", nearest_mode, _NEAREST[:4])
    opts = _opts(mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
                 exclude_outside, extrapolation_value, antialias)
    return resize(ctx, x, roi, scales, sizes, opts, axes, keep_aspect_ratio_policy)
