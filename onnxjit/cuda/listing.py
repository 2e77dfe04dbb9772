"""What `rep.source()` and `rep.explain()` show for the CUDA target: the launch schedule read
from the launch records (kernel, grid, block, arguments, ONNX nodes), then the text of the
generated kernels and where the library kernels live."""
from __future__ import annotations

import inspect

import numpy as np

from ..fused import comment_text
from .launch import ERROR_FLAG, Buf, Const


def _arg(a, names):
    if isinstance(a, Buf):
        return names.setdefault(id(a.value), f"t{len(names)}")
    if isinstance(a, Const):
        return f"<int64[{a.array.size}] {np.array2string(a.array, threshold=8)}>".replace("\n", "")
    if a is ERROR_FLAG:
        return "error_flag"
    return repr(a.item() if isinstance(a, np.generic) else a)


def listing(exe):
    names = {id(v): f"in{i}" for i, v in enumerate(exe.program.inputs)}
    names.update({id(v): f"out{j}" for j, v in enumerate(exe.program.outputs)})
    lines = [f"# CUDA launches for signature {[(list(s), str(d)) for _, s, d in exe.signature]}",
             f"# {len(exe.launches)} launches on one stream; pooled intermediates "
             f"{exe.pool_bytes} bytes", ""]
    sources = {}
    for ln in exe.launches:
        nodes = ", ".join(comment_text(f"{n or '?'} ({op})") for n, op in ln.nodes)
        lines.append(f"# {ln.name}: {nodes}" if nodes else f"# {ln.name}")
        args = ", ".join(_arg(a, names) for a in ln.args)
        where = "host call" if ln.host else f"[grid={ln.grid}, block={ln.block}, stream]"
        lines.append(f"{ln.kernel_name}{where}({args})")
        if ln.source:
            sources.setdefault(ln.kernel_name, ln.source)
        elif not ln.host:
            fn = getattr(ln.kernel, "py_func", None)
            module = getattr(fn, "__module__", "?")
            sources.setdefault(ln.kernel_name, f"# library kernel {module}.{ln.kernel_name}")
    lines.append("")
    for text in sources.values():
        lines += ["", text.rstrip("\n")]
    return "\n".join(lines) + "\n"


def library_source(kernel):
    """The Python source of a library kernel (for readers who want the whole picture)."""
    return inspect.getsource(getattr(kernel, "py_func", kernel))


class Row(tuple):
    """(launch, kernel, grid, block, nodes), printing as one table line."""

    def __str__(self):
        return f"{self[0]:<34} {self[1]:<22} grid={self[2]!s:<14} block={self[3]!s:<9} {self[4]}"


class Explanation(list):
    def __str__(self):
        return "\n".join(str(r) for r in self)


def explain(exe):
    return Explanation(Row((ln.name, ln.kernel_name, ln.grid, ln.block,
                            ", ".join(comment_text(op) for _, op in ln.nodes)))
                       for ln in exe.launches)
