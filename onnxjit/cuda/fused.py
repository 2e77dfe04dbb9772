"""Fused elementwise groups as numba.cuda kernels (rendered from codegen_templates/cuda_fused).

One thread per output element in a grid-stride loop over the flat output. Dims that index alike
merge (fused.collapse, shared with the CPU target), and an operand broadcast along some merged
dims is read at the row-major offset of its full dims only, from the loop index's coordinates.
The kernel's text holds no sizes (they are arguments), so it is named by its hash and shared.
"""
from __future__ import annotations

import hashlib
import os

import numpy as np

from .. import compile as _compile
from .. import scalar_expr
from ..fused import collapse, comment_text
from ..ir import NARROW_FLOATS
from ..source import LineBuffer, dtype_src, scalar_lit, template


class FusedKernel:
    """A rendered kernel: its name, file text, and the loop dims' sizes for a launch."""

    def __init__(self, name, text, loop):
        self.name, self.text, self.loop = name, text, loop

    def load(self):
        """The kernel's dispatcher, imported from `<cache>/cuda/<name>.py` (Numba caches its
        machine code beside it)."""
        return load_kernel_file(self.name, self.text)


def render(kernel):
    """The FusedKernel of a planned "fused" Kernel (plan.Kernel)."""
    groups, views = collapse(kernel.shape, [v.shape for v in kernel.inputs])
    loop = [int(np.prod([kernel.shape[d] for d in g], dtype=np.int64)) for g in groups]
    text = _text(kernel, "cuda_f_", groups, views)
    name = "cuda_f_" + hashlib.sha256(text.encode()).hexdigest()[:20]
    return FusedKernel(name, _text(kernel, name, groups, views), loop)


def _text(kernel, name, groups, views):
    dims = [f"n{d}" for d in range(len(groups))]
    params = dims + [f"a{i}" for i in range(len(kernel.inputs))] + \
        [f"o{i}" for i in range(len(kernel.outputs))]
    ops = list(dict.fromkeys(op for _, op in kernel.nodes))
    buf = LineBuffer()
    buf.splice(template("cuda_fused.py.tmpl").substitute(
        name=name, params=", ".join(params), ops=", ".join(comment_text(op) for op in ops)))
    with buf.indent(2):
        if any(not all(v) and any(v) for v in views):
            _coordinates(buf, dims)
        _body(buf, kernel, views, dims)
    return buf.getvalue()


def _coordinates(buf, dims):
    """i0, i1 ... of the flat index i over the loop dims (row-major)."""
    if len(dims) == 1:
        buf.line("i0 = i")
        return
    buf.line("r = i")
    for d in range(len(dims) - 1, 0, -1):
        buf.line(f"i{d} = r % {dims[d]}")
        buf.line(f"r //= {dims[d]}")
    buf.line("i0 = r")


def _offset(view, dims):
    """Source of an operand's flat offset: i if it spans every loop dim, 0 if none."""
    if all(view):
        return "i"
    full = [d for d, f in enumerate(view) if f]
    if not full:
        return "0"
    expr = f"i{full[0]}"
    for d in full[1:]:
        expr = f"({expr}) * {dims[d]} + i{d}"
    return expr


def _body(buf, kernel, views, dims):
    scalars = {id(v): f"a{p}[{_offset(view, dims)}]"
               for p, (v, view) in enumerate(zip(kernel.inputs, views))}
    outs = {id(o): f"o{i}" for i, o in enumerate(kernel.outputs)}
    for n, step in enumerate(kernel.steps):
        out = step.outs[0]
        args = [scalars.get(id(v)) or scalar_lit(v.const.reshape(-1)[0], v.dtype)
                for v in step.inputs]
        cast = (f"__k_scalar.{NARROW_FLOATS[out.dtype]}" if out.dtype in NARROW_FLOATS
                else dtype_src(out.dtype))
        buf.line(f"v{n} = {cast}({scalar_expr.render(step.expr, args)})")
        scalars[id(out)] = f"v{n}"
        if id(out) in outs:
            buf.line(f"{outs[id(out)]}[i] = v{n}")


def load_kernel_file(name, text):
    """Write `text` to `<cache>/cuda/<name>.py` unless there already, import it, and return
    the function `name` (the file is a real module: tracebacks and Numba's cache find it).

    A cache dir that cannot be written (read-only, full) leaves the file in this process's
    fallback folder (compile.fallback_cache_dir, with a CacheWarning), as on the CPU target; a
    damaged file is rewritten (its text differs), a damaged bytecode file dropped
    (compile._import), and damaged Numba cache files count as missing (compile.guard_numba_cache,
    installed on numba-cuda's cache by cuda/__init__)."""
    import sys
    module = f"onnxjit_cuda_{name}"
    with _compile._IMPORT_LOCK:
        if module not in sys.modules:
            folder = os.path.join(_compile.cache_dir(), "cuda")
            try:
                path = _write_kernel(folder, name, text)
            except OSError as exc:
                fallback = _compile.fallback_cache_dir(folder, exc)
                path = _write_kernel(os.path.join(fallback, "cuda"), name, text)
            try:
                _compile._import(module, path)
            except RuntimeError as exc:
                # Numba finds nowhere to keep the kernel's machine code beside a read-only file
                # ("cannot cache function ...: no locator available"): import it from the
                # fallback folder, where the file and its cache can be written.
                if "cannot cache function" not in str(exc):
                    raise
                fallback = _compile.fallback_cache_dir(folder, exc)
                _compile._import(module, _write_kernel(os.path.join(fallback, "cuda"), name, text))
    return getattr(sys.modules[module], name)


def _write_kernel(folder, name, text):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.py")
    _compile._write_once(path, text)
    return path
