"""Data-movement kernels: Concat, copies along one axis through an index map (Pad, Tile,
Compress), Trilu, Dropout at inference, Transpose."""
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from . import PRANGE_ONLY
from .conv import copy_run
from .parallel import CONCAT_PAR_MIN, I0, num_threads, split_range
from .simd import LANES16 as LANES, vload, vstore, vtranspose

from . import JIT as _JIT

@njit(parallel=PRANGE_ONLY, **_JIT)
def concat(xs):
    """ONNX Concat as 2-D copies: `xs` is a tuple of C-contiguous (outer, width) arrays of one
    dtype (each input viewed as the product of its dims before the axis by the product of the
    rest; the lowering reshapes them, for free), the result the (outer, sum of widths) array whose
    rows are the inputs' rows one after another.  Whatever the rank, one specialization per
    dtype and number of inputs; the copy itself (`_concat_part`) one per dtype.  Several Numba
    threads each copy a part of every row (or whole rows, when there are many) once the output
    is large."""
    outer = np.int64(xs[0].shape[0])
    total = np.int64(0)
    for i in range(len(xs)):
        total += xs[i].shape[1]
    y = np.empty((outer, total), xs[0].dtype)
    nt = np.int64(num_threads()) if outer * total >= CONCAT_PAR_MIN else np.int64(1)
    if nt > 1:
        for t in prange(nt):
            at = np.int64(0)
            for i in range(len(xs)):
                _concat_part(xs[i], y, at, np.int64(t), nt)
                at += xs[i].shape[1]
    else:
        at = np.int64(0)
        for i in range(len(xs)):
            _concat_part(xs[i], y, at, I0, nt)
            at += xs[i].shape[1]
    return y


@njit(**_JIT)
def _concat_part(x, y, at, t, nt):
    """Part t of nt of copying x (outer, w) into columns [at, at + w) of y: rows t/nt of the way
    when there are at least 4 per thread, else that part of every row.  Every int an int64
    (never a literal or the parallel loop's unsigned index): one specialization per dtype."""
    outer, w = x.shape
    total = y.shape[1]
    xf, yf = x.reshape(x.size), y.reshape(y.size)
    if outer >= 4 * nt:
        r0, r1 = split_range(outer, nt, t, 1)
        for r in range(r0, r1):
            copy_run(yf, r * total + at, xf, r * w, w, 1)
    else:
        a0, a1 = split_range(w, nt, t, 16)
        for r in range(outer):
            copy_run(yf, r * total + at + a0, xf, r * w + a0, a1 - a0, 1)


@njit(**_JIT)
def take_axis(x3, src, fill):
    """y[o, j, i] = x3[o, src[j], i], or `fill` where src[j] < 0; x3 is (outer, axis, inner)."""
    outer, n_axis, inner = x3.shape
    n = src.shape[0]
    for j in range(n):
        if src[j] >= n_axis:
            raise IndexError("take_axis: index map out of range")
    y = np.empty((outer, n, inner), x3.dtype)
    for o in range(outer):
        for j in range(n):
            s = src[j]
            if s < 0:
                for i in range(inner):
                    y[o, j, i] = fill
            else:
                for i in range(inner):
                    y[o, j, i] = x3[o, s, i]
    return y


@njit(**_JIT)
def trilu(x3, k, upper):
    """ONNX Trilu on x3 = (batch, N, M): keep j - i >= k (upper) or j - i <= k (lower), else 0."""
    y = np.zeros_like(x3)
    for b in range(x3.shape[0]):
        for i in range(x3.shape[1]):
            for j in range(x3.shape[2]):
                if (j - i >= k) if upper else (j - i <= k):
                    y[b, i, j] = x3[b, i, j]
    return y


@njit(**_JIT)
def dropout_inference(x, training_mode, ratio):
    """A copy of x when not training or ratio is 0; training with dropping is refused at run time."""
    if training_mode and ratio != 0:
        raise ValueError("Dropout: training mode with a non-zero ratio is not supported")
    return x.copy()


_TILE = 16


@njit(**_JIT)
def _transpose_tiles(xf, o, rows, cols, y):
    """y[o + j * rows + i] = xf[o + i * cols + j] for a (rows, cols) matrix at offset o, in
    _TILE x _TILE tiles. Unsigned offsets: no negative-index wraparound in the loops."""
    uo, urows, ucols = np.uint64(o), np.uint64(rows), np.uint64(cols)
    for i0 in range(0, rows, _TILE):
        i1 = min(rows, i0 + _TILE)
        for j0 in range(0, cols, _TILE):
            j1 = min(cols, j0 + _TILE)
            for i in range(np.uint64(i0), np.uint64(i1)):
                src = uo + i * ucols
                for j in range(np.uint64(j0), np.uint64(j1)):
                    y[uo + j * urows + i] = xf[src + j]


@njit(**_JIT)
def _transpose_tiles_f32(xf, o, rows, cols, y):
    """_transpose_tiles for float32: whole 16 x 16 tiles as 16 vector loads, an in-register
    transpose (simd.vtranspose) and 16 vector stores; the ragged edges as scalars."""
    r16, c16 = rows - rows % LANES, cols - cols % LANES
    for i0 in range(0, r16, LANES):
        for j0 in range(0, c16, LANES):
            s = o + i0 * cols + j0
            t = vtranspose((vload(xf, s), vload(xf, s + cols), vload(xf, s + 2 * cols),
                            vload(xf, s + 3 * cols), vload(xf, s + 4 * cols),
                            vload(xf, s + 5 * cols), vload(xf, s + 6 * cols),
                            vload(xf, s + 7 * cols), vload(xf, s + 8 * cols),
                            vload(xf, s + 9 * cols), vload(xf, s + 10 * cols),
                            vload(xf, s + 11 * cols), vload(xf, s + 12 * cols),
                            vload(xf, s + 13 * cols), vload(xf, s + 14 * cols),
                            vload(xf, s + 15 * cols)))
            d = o + j0 * rows + i0
            for k in range(LANES):
                vstore(y, d + k * rows, t[k])
    if r16 < rows or c16 < cols:
        uo, urows, ucols = np.uint64(o), np.uint64(rows), np.uint64(cols)
        for i in range(np.uint64(0), urows):
            src = uo + i * ucols
            j_start = np.uint64(c16) if i < np.uint64(r16) else np.uint64(0)
            for j in range(j_start, ucols):
                y[uo + j * urows + i] = xf[src + j]


def _tiles(xf, o, rows, cols, y):
    """_transpose_tiles_f32 for float32 arrays, _transpose_tiles for the others."""


@overload(_tiles)
def _tiles_impl(xf, o, rows, cols, y):
    if xf.dtype == types.float32:
        return lambda xf, o, rows, cols, y: _transpose_tiles_f32(xf, o, rows, cols, y)
    return lambda xf, o, rows, cols, y: _transpose_tiles(xf, o, rows, cols, y)


# The rank of movement.transpose's `shape` and `perm`: the lowering merges the axes that stay
# adjacent, drops size-1 axes and pads to this rank with leading size-1 axes
# (ops.movement.canonical_transpose), so the transposes of a dtype and input rank are one
# specialization whatever their permutations (merged ranks above it, rare, keep their own).
TRANSPOSE_RANK = 4


@njit(**_JIT)
def transpose(x, shape, perm, out_shape):
    """x read as a C array of `shape`, its axes permuted by `perm`, as a new C array of
    out_shape (the same elements in the permuted order).

    The lowering merges axes that stay adjacent, drops size-1 axes and pads with leading
    size-1 axes to TRANSPOSE_RANK (``ops.movement.canonical_transpose``).  A (batch of) 2-D
    transpose(s) is copied in tiles; when the last axis stays last (ShuffleNet's channel
    shuffle, attention's head split), each output row is one contiguous run of x, copied as
    such; otherwise elements are gathered with the input stride.
    """
    r = len(shape)
    xf = np.ascontiguousarray(x).reshape(x.size)
    y = np.empty(x.size, x.dtype)
    size = 1
    for d in range(r):
        size *= shape[d]
    if size != x.size:
        raise ValueError("transpose: shape does not match x")
    if size == 0:
        return y.reshape(out_shape)
    # a (batch of) 2-D transpose(s), merged (1, 0) or (0, 2, 1), padded (0, 1, 3, 2): in tiles,
    # so that each cache line of x and y read or written serves a whole tile row, not one
    # element; float32 tiles transposed in registers (128x256: 33 -> 4 us; attention's K^T).
    # Constant indices: perm indexed in a loop here made the gather below 10-25% slower.
    if ((r == 2 and perm[0] == 1) or (r == 3 and perm[0] == 0 and perm[1] == 2)
            or (r == 4 and perm[0] == 0 and perm[1] == 1 and perm[2] == 3)):
        rows, cols = shape[r - 2], shape[r - 1]
        for b in range(size // (rows * cols)):
            _tiles(xf, b * rows * cols, rows, cols, y)
        return y.reshape(out_shape)
    istride = np.empty(r, np.int64)
    acc = 1
    for d in range(r - 1, -1, -1):
        istride[d] = acc
        acc *= shape[d]
    osize, ostep = np.empty(r, np.int64), np.empty(r, np.int64)  # output axes: size, x stride
    for d in range(r):
        osize[d], ostep[d] = shape[perm[d]], istride[perm[d]]
    inner, step = osize[r - 1], ostep[r - 1]
    idx = np.zeros(r, np.int64)
    src, dst = 0, 0
    for _ in range(size // inner):
        if step == 1:       # unsigned offsets: LLVM vectorises the run copy
            for i in range(np.uint64(inner)):
                y[np.uint64(dst) + i] = xf[np.uint64(src) + i]
        else:
            for i in range(inner):
                y[dst + i] = xf[src + i * step]
        dst += inner
        d = r - 2                       # advance the odometer over the outer output axes
        while d >= 0:
            idx[d] += 1
            src += ostep[d]
            if idx[d] < osize[d]:
                break
            src -= ostep[d] * osize[d]
            idx[d] = 0
            d -= 1
    return y.reshape(out_shape)
