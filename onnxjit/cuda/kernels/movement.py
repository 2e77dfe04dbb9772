"""Index-mapping kernels: one strided copy serves Transpose, Slice, Expand, Tile, Concat, Split
and Pad; Gather and a casting flat copy complete the set. Grid-stride loops, one output element
per iteration."""
from numba import cuda


@cuda.jit(cache=True)
def strided_copy(src, dst, n, rank, dims, sstride, soff, dstride, doff):
    """dst[doff + sum(q_k * dstride[k])] = src[soff + sum(q_k * sstride[k])] for every index q
    of the iteration shape `dims` (rank entries, row-major; strides may be 0 or negative)."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        r = i
        s = soff
        d = doff
        for k in range(rank - 1, -1, -1):
            q = r % dims[k]
            r //= dims[k]
            s += q * sstride[k]
            d += q * dstride[k]
        dst[d] = src[s]


@cuda.jit(cache=True)
def copy_flat(src, dst, n):
    """dst[i] = src[i], converted to dst's dtype on the store (float16 <-> float32 edges)."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        dst[i] = src[i]


@cuda.jit(cache=True)
def fill(dst, n, value):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        dst[i] = value[0]


@cuda.jit(cache=True)
def gather(data, idx, out, n, axis_len, inner, n_idx, err):
    """out viewed as (outer, n_idx, inner) = data (outer, axis_len, inner) taken at idx along the
    middle axis; negative indices count from the end. An index out of range writes 0 and sets
    err[0] (the runtime raises), so nothing is read out of bounds."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        k = i % inner
        r = i // inner
        j = r % n_idx
        o = r // n_idx
        ix = idx[j]
        if ix < 0:
            ix += axis_len
        if ix < 0 or ix >= axis_len:
            err[0] = 1
            out[i] = data[0] - data[0]
        else:
            out[i] = data[(o * axis_len + ix) * inner + k]


@cuda.jit(cache=True)
def mapped_copy(src, dst, n, rank, dims, maps, map_start, sstride, value):
    """dst (row-major over `dims`) at index q = src at sum(maps[map_start[k] + q_k] *
    sstride[k]), or value[0] where some axis maps to -1 (Pad in every mode: constant, edge,
    reflect, wrap)."""
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        r = i
        s = 0
        inside = True
        for k in range(rank - 1, -1, -1):
            q = r % dims[k]
            r //= dims[k]
            m = maps[map_start[k] + q]
            if m < 0:
                inside = False
            s += m * sstride[k]
        dst[i] = src[s] if inside else value[0]
