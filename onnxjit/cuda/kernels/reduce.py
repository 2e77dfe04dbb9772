"""Block-level reductions: one block per output (grid-stride over outputs), its threads striding
over the reduced axis, then a tree in shared memory. Arrays are viewed as (outer, r, inner) and
an output is one (outer, inner) pair; launch with BLOCK threads per block."""
import math

from numba import cuda

from ..target import simulator

# Threads per block: a power of two (the tree halves it). The simulator runs each thread as a
# Python thread: there 32, so tiny test shapes still span several strides of a block.
BLOCK = 32 if simulator() else 128

# Reduction kinds (the `op` argument): what each element contributes, how contributions combine.
SUM, SUM_SQUARE, SUM_ABS, PROD, MAX, MIN, LOG_SUM_EXP = range(7)


@cuda.jit(device=True)
def _combine(op, a, b):
    if op == MAX:
        return a if (a >= b or a != a) else b
    if op == MIN:
        return a if (a <= b or a != a) else b
    if op == PROD:
        return a * b
    return a + b


@cuda.jit(device=True)
def _contribution(op, x, shift):
    if op == SUM_SQUARE:
        return x * x
    if op == SUM_ABS:
        return abs(x)
    if op == LOG_SUM_EXP:
        return math.exp(x - shift)
    return x


@cuda.jit(device=True)
def _block_reduce(sm, op, value):
    """Every thread's `value` combined across the block; the result in all threads."""
    t = cuda.threadIdx.x
    sm[t] = value
    cuda.syncthreads()
    s = BLOCK // 2
    while s > 0:
        if t < s:
            sm[t] = _combine(op, sm[t], sm[t + s])
        cuda.syncthreads()
        s //= 2
    result = sm[0]
    cuda.syncthreads()
    return result


@cuda.jit(cache=True)
def reduce_axis(x, y, outer, r, inner, op, identity):
    """y[o, k] = combine over j of contribution(x[o, j, k]). `identity` holds, in x's dtype, the
    start of each thread's partial result, the lowest value and 0. LOG_SUM_EXP subtracts the
    maximum first."""
    sm = cuda.shared.array(BLOCK, dtype=x.dtype)
    t = cuda.threadIdx.x
    for out in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        o = out // inner
        k = out % inner
        base = o * r * inner + k
        shift = identity[2]
        if op == LOG_SUM_EXP:
            acc = identity[1]
            for j in range(t, r, BLOCK):
                acc = _combine(MAX, acc, x[base + j * inner])
            shift = _block_reduce(sm, MAX, acc)
            if shift != shift or abs(shift) == math.inf:
                shift = identity[2]
        acc = identity[0]
        for j in range(t, r, BLOCK):
            acc = _combine(op, acc, _contribution(op, x[base + j * inner], shift))
        total = _block_reduce(sm, SUM if op == LOG_SUM_EXP else op, acc)
        if t == 0:
            if op != LOG_SUM_EXP:
                y[out] = total
            elif total > 0:
                y[out] = math.log(total) + shift
            else:                      # the empty set: log(0)
                y[out] = identity[1]


@cuda.jit(cache=True)
def arg_extreme(x, y, outer, r, inner, is_max, last):
    """y[o, k] = index of the max (is_max) or min over j of x[o, j, k]; ties go to the first
    index (or the last with `last`), NaN counts as the extreme like numpy."""
    sv = cuda.shared.array(BLOCK, dtype=x.dtype)
    si = cuda.shared.array(BLOCK, dtype=y.dtype)
    t = cuda.threadIdx.x
    for out in range(cuda.blockIdx.x, outer * inner, cuda.gridDim.x):
        o = out // inner
        k = out % inner
        base = o * r * inner + k
        best_i = -1
        best = x[base]
        for j in range(t, r, BLOCK):
            v = x[base + j * inner]
            if best_i < 0 or _better(v, best, j, best_i, is_max, last):
                best, best_i = v, j
        sv[t] = best
        si[t] = best_i
        cuda.syncthreads()
        s = BLOCK // 2
        while s > 0:
            if t < s and si[t + s] >= 0:
                if si[t] < 0 or _better(sv[t + s], sv[t], si[t + s], si[t], is_max, last):
                    sv[t] = sv[t + s]
                    si[t] = si[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            y[out] = si[0]
        cuda.syncthreads()


@cuda.jit(device=True)
def _better(v, best, j, best_j, is_max, last):
    """Does (v at j) beat (best at best_j)?"""
    if best != best:                       # NaN already holds: only an earlier NaN beats it
        return v != v and ((j > best_j) if last else (j < best_j))
    if v != v:
        return True
    if v == best:
        return (j > best_j) if last else (j < best_j)
    return (v > best) if is_max else (v < best)
