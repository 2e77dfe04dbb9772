"""Plan -> launches: each planned kernel becomes one or more kernel launches with their grid,
block and arguments (structured records; the runtime binds buffers, source() prints them).

Arguments are `Buf(value)` (the flat device buffer of a Value), `Const(array)` (a small array
uploaded once: strides, offsets, an identity element), `ERROR_FLAG` (the rep's bounds-check
flag) or plain numbers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .fused import render
from .kernels import conv as kconv, gemm as kgemm, movement as kmove
from .kernels import normalization as knorm, reduce as kred
from .ops import row_major


@dataclass(frozen=True, eq=False)
class Buf:
    value: object


@dataclass(frozen=True, eq=False)
class Const:
    array: np.ndarray


ERROR_FLAG = "error_flag"


@dataclass(eq=False)
class Launch:
    """One kernel launch (or, with `host`, a Python call fn(stream, *args) such as cuBLAS)."""
    name: str
    kernel: object
    grid: tuple
    block: tuple
    args: list
    reads: list
    writes: list
    nodes: list = field(default_factory=list)
    source: str = ""          # the generated kernel's text, for fused kernels
    host: bool = False

    @property
    def kernel_name(self):
        # the Python function's name first: on hardware a numba-cuda dispatcher's own __name__
        # did not name the kernel (rep.source() lacked 'layer_norm' on an H200, not under the
        # simulator)
        return getattr(getattr(self.kernel, "py_func", None), "__name__", None) or getattr(
            self.kernel, "__name__", None) or repr(self.kernel)


def build(kernels, target):
    """The launches of a plan, in order; views become aliases (`aliases` {id(out): in})."""
    launches, aliases = [], {}
    for k in kernels:
        if k.kind == "fused":
            launches.append(_fused(k, target))
            continue
        step = k.steps[0]
        kind = step.meta["cuda"]
        if kind == "view":
            aliases[id(step.outs[0])] = step.inputs[0]
            continue
        for launch in BUILDERS[kind](step, target):
            launch.name = f"{k.name}" + (f"_{launch.name}" if launch.name else "")
            launch.nodes = step.nodes
            launches.append(launch)
    return launches, aliases


def _fused(kernel, target):
    fk = render(kernel)
    n = int(np.prod(kernel.shape, dtype=np.int64))
    args = [n, *fk.loop, *map(Buf, kernel.inputs), *map(Buf, kernel.outputs)]
    grid, block = target.grid(n)
    return Launch(kernel.name, fk.load(), (grid,), (block,), args, list(kernel.inputs),
                  list(kernel.outputs), kernel.nodes, fk.text)


def _grid_stride(name, fn, target, n, args, reads, writes):
    grid, block = target.grid(n)
    return Launch(name, fn, (grid,), (block,), args, reads, writes)


def _copy(target, src, dst, dims, sstride, soff, dstride, doff, name=""):
    n = int(np.prod(dims, dtype=np.int64))
    args = [Buf(src), Buf(dst), n, len(dims), Const(np.asarray(dims, np.int64)),
            Const(np.asarray(sstride, np.int64)), int(soff),
            Const(np.asarray(dstride, np.int64)), int(doff)]
    return _grid_stride(name, kmove.strided_copy, target, n, args, [src], [dst])


def _strided(step, target):
    x, out, m = step.inputs[0], step.outs[0], step.meta
    dims = [int(d) for d in m["dims"]]
    return [_copy(target, x, out, dims, m["sstride"], m["soff"], row_major(dims), 0)]


def _concat(step, target):
    out, m = step.outs[0], step.meta
    total, inner, at, launches = sum(m["sizes"]), m["inner"], 0, []
    for i, (x, size) in enumerate(zip(step.inputs, m["sizes"])):
        dims = [m["outer"], size, inner]
        launches.append(_copy(target, x, out, dims, row_major(dims), 0,
                              [total * inner, inner, 1], at * inner, f"part{i}"))
        at += size
    return launches


def _pad(step, target):
    x, out, m = step.inputs[0], step.outs[0], step.meta
    args = [Buf(x), Buf(out), out.size, max(out.rank, 1),
            Const(np.array(out.shape or (1,), np.int64)), Const(m["maps"]), Const(m["map_start"]),
            Const(m["sstride"]), Const(m["value"])]
    return [_grid_stride("", kmove.mapped_copy, target, out.size, args, [x], [out])]


def _fill(step, target):
    out = step.outs[0]
    return [_grid_stride("", kmove.fill, target, out.size,
                         [Buf(out), out.size, Const(step.meta["value"])], [], [out])]


def _gather(step, target):
    (data, idx), out, m = step.inputs, step.outs[0], step.meta
    args = [Buf(data), Buf(idx), Buf(out), out.size, m["axis_len"], m["inner"], idx.size,
            ERROR_FLAG]
    return [_grid_stride("", kmove.gather, target, out.size, args, [data, idx], [out])]


def _blocks(target, rows):
    return (max(1, min(rows, target.max_blocks)),), (kred.BLOCK,)


def _reduce(step, target):
    x, out, m = step.inputs[0], step.outs[0], step.meta
    outer, r, inner = m["dims"]
    grid, block = _blocks(target, outer * inner)
    args = [Buf(x), Buf(out), outer, r, inner, m["op"], Const(m["identity"])]
    return [Launch("", kred.reduce_axis, grid, block, args, [x], [out])]


def _argreduce(step, target):
    x, out, m = step.inputs[0], step.outs[0], step.meta
    outer, r, inner = m["dims"]
    grid, block = _blocks(target, outer * inner)
    args = [Buf(x), Buf(out), outer, r, inner, m["is_max"], m["last"]]
    return [Launch("", kred.arg_extreme, grid, block, args, [x], [out])]


def _softmax(step, target):
    x, out, m = step.inputs[0], step.outs[0], step.meta
    outer, r, inner = m["dims"]
    grid, block = _blocks(target, outer * inner)
    args = [Buf(x), Buf(out), outer, r, inner, m["log"]]
    return [Launch("", knorm.softmax, grid, block, args, [x], [out])]


def _layernorm(step, target):
    x, scale, *rest = step.inputs
    m, outs = step.meta, step.outs
    bias = rest[0] if m["has_bias"] else scale
    y = outs[0]
    mean, rstd = (outs[1], outs[2]) if m["stats"] else (y, y)
    grid, block = _blocks(target, m["rows"])
    args = [Buf(x), Buf(scale), Buf(bias), Buf(y), Buf(mean), Buf(rstd), m["rows"], m["cols"],
            m["eps"], m["has_bias"], m["stats"]]
    return [Launch("", knorm.layer_norm, grid, block, args, [x, scale, bias], list(outs))]


def _pool(step, target):
    x, out, m = step.inputs[0], step.outs[0], step.meta
    geometry = [*m["in_sp"], *m["k"], *m["out_sp"], *m["s"], *m["p"], *m["d"], *m["e"]]
    args = [Buf(x), Buf(out), out.size, *geometry, m["is_max"], m["count_pad"]]
    return [_grid_stride("", kconv.pool, target, out.size, args, [x], [out])]


def _gemm(step, target):
    """The GEMM of MatMul, Gemm and Conv (after an im2col launch when the Conv needs one)."""
    m = step.meta
    a, b = step.inputs[0], step.inputs[1]
    bias = step.inputs[2] if m["has_bias"] else a
    out, launches = step.outs[0], []
    if m.get("im2col"):
        scratch, g = step.outs[1], m["im2col"]
        geometry = [g["c"], *g["ins"], *g["k"], *g["outs"], *g["s"], *g["p"], *g["d"]]
        launches.append(_grid_stride("im2col", kconv.im2col, target, scratch.size,
                                     [Buf(b), Buf(scratch), scratch.size, *geometry],
                                     [b], [scratch]))
        b = scratch
    from . import cublas
    route = cublas.launch(step, a, b, bias, out, target) if target.cublas else None
    if route is not None:
        return launches + route
    tiles = kgemm.TILE
    grid = (max(1, math.ceil(m["n"] / tiles)), max(1, math.ceil(m["m"] / tiles)),
            max(1, min(m["batch"], 65535, target.max_blocks)))
    sam, sak, sbk, sbn, scm = m["strides"]
    args = [Buf(a), Buf(b), Buf(out), Buf(bias), m["m"], m["n"], m["k"], m["batch"],
            Const(m["aoff"]), Const(m["boff"]), Const(m["coff"]), Const(m["biasoff"]),
            sam, sak, sbk, sbn, scm, *m["bias_strides"], m["alpha"], m["beta"], m["has_bias"]]
    launches.append(Launch("gemm" if launches else "", kgemm.gemm, grid, (tiles, tiles), args,
                           [a, b, bias], [out]))
    return launches


BUILDERS = {"strided": _strided, "concat": _concat, "pad": _pad, "fill": _fill, "gather": _gather,
            "reduce": _reduce, "argreduce": _argreduce, "softmax": _softmax,
            "layernorm": _layernorm, "pool": _pool, "gemm": _gemm}
