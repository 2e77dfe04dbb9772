"""Inspection: what the compiler made of a model, as a table and as HTML for Jupyter.

`explain(rep)` lists the kernels of one compiled signature (source nodes, outputs, compiled or not,
time per call when profiled); `to_html(rep)` is the rich Jupyter view. The CLI, `onnxjit show
MODEL.onnx`, is onnxjit/tools/show.py (`onnxjit.explain.show_main` still names it). Everything
taken from the model is untrusted: HTML escapes it, plain text escapes control characters (a node
name must not drive the terminal).
"""
from __future__ import annotations

import html
import sys

import numpy as np

# Sources longer than this many lines start collapsed in the HTML view.
OPEN_SOURCE_LINES = 150


class PlanTable(list):
    """The rows of `explain()`: a plain list of dicts that prints as a table and shows as HTML."""

    def __str__(self):
        return format_table(self)

    def _repr_html_(self):
        return plan_html(self)


def explain(rep, signature=None):
    """One row per kernel of a compiled signature (default: the most recent), in execution order."""
    compiled = rep.compiled(signature)
    where = _kernel_hosts(compiled)
    profile = compiled.profile
    return PlanTable(_row(k, where.get(k.name), profile) for k in compiled.kernels)


def _row(kernel, compiled, profile):
    total, calls = (profile or {}).get(kernel.name, (0.0, 0))
    return {
        "kernel": kernel.name,
        "kind": kernel.kind,
        "nodes": [name for name, _ in kernel.nodes],
        "op_types": [op for _, op in kernel.nodes],
        "output_shapes": [tuple(v.shape) for v in kernel.outputs],
        "output_dtypes": [str(np.dtype(v.dtype)) for v in kernel.outputs],
        "compiled": bool(compiled),
        "calls": calls if profile is not None else None,
        "us_per_call": total / calls * 1e6 if calls else None,
    }


# -- which function runs each kernel, and is it compiled? ----------------------------------------
def _kernel_hosts(compiled):
    """{kernel name: True when it runs inside a Numba-compiled function of the generated module},
    from the plan's schedule (plan.Schedule.hosts: the function running each kernel, njit or the
    Python driver)."""
    schedule = getattr(compiled, "schedule", None)
    hosts = schedule.hosts() if schedule is not None else {}
    found = {}
    for kernel in compiled.kernels:
        host = hosts.get(kernel.name)
        ok = host is not None and _is_compiled(compiled.module, *host)
        if kernel.kind == "fused":
            # Called from compiled code, a jitted kernel is compiled into its caller (when the caller
            # comes from Numba's disk cache the kernel's own dispatcher stays empty: that is fine).
            # The module binds the kernel's name to a shared function (emit.Emitter.bind_fused).
            ok = ok and _is_jitted(compiled.module, kernel.name)
        found[kernel.name] = ok
    return found


def _is_jitted(module, name):
    """`name` is a Numba dispatcher in the module (without a module: emit binds every fused
    kernel's name to a jitted shared kernel)."""
    return module is None or _is_dispatcher(getattr(module, name, None))


def _is_dispatcher(target):
    from numba.core.dispatcher import Dispatcher
    return isinstance(target, Dispatcher)


def _is_compiled(module, function, jitted):
    """A function is compiled when the module holds it as a Numba dispatcher with machine code
    (without a module: when the schedule made it an njit function)."""
    target = getattr(module, function, None) if module is not None else None
    if target is None:
        return jitted
    return _is_dispatcher(target) and bool(target.signatures)


# -- plain text ----------------------------------------------------------------------------------
COLUMNS = ("kernel", "kind", "nodes", "outputs", "compiled", "us/call")


def format_table(rows, width=60):
    """A fixed-width text table of `explain()` rows; long cells are cut to `width` characters."""
    cells = [[_cut(c, width) for c in _text_cells(r)] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(COLUMNS)]
    line = "  ".join("{:<%d}" % w for w in widths)
    out = [line.format(*COLUMNS), line.format(*("-" * w for w in widths))]
    out += [line.format(*c) for c in cells]
    return "\n".join(s.rstrip() for s in out)


def _text_cells(row):
    us = "" if row["us_per_call"] is None else f"{row['us_per_call']:.1f}"
    return [plain(row["kernel"]), row["kind"], plain(node_text(row)), outputs_text(row),
            "yes" if row["compiled"] else "no", us]


def node_text(row):
    """'name (OpType), ...' for a row."""
    return ", ".join(f"{n or '?'} ({op})" for n, op in zip(row["nodes"], row["op_types"]))


def outputs_text(row):
    """'float32[2, 3], ...' for a row."""
    return ", ".join(f"{d}{list(s)}" for s, d in zip(row["output_shapes"], row["output_dtypes"]))


def plain(text):
    """Model text made safe for a terminal: non-printable characters become escapes."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in str(text))


def _cut(text, width):
    return text if len(text) <= width else text[:width - 3] + "..."


# -- HTML ----------------------------------------------------------------------------------------
def _e(value):
    return html.escape(plain(value), quote=True)


def to_html(rep, signature=None):
    """The rich view of a prepared model: summary, cached signatures, fusion plan, generated source."""
    parts = ['<div class="onnxjit-rep">', model_html(rep), cache_html(rep)]
    try:
        compiled = rep.compiled(signature)
    except LookupError as exc:
        parts.append(f"<p><i>{_e(exc)}</i></p>")
    else:
        parts.append(f"<h4>Fusion plan for {_e(signature_text(compiled.signature))}</h4>")
        parts.append(plan_html(explain(rep, signature)))
        parts.append(source_html(compiled.source))
    parts.append("</div>")
    return "\n".join(parts)


def model_html(rep):
    """Model name, producer, opsets, node count and the declared inputs and outputs."""
    model, graph = rep.model, rep.model.graph
    opsets = ", ".join(f"{e.domain or 'ai.onnx'} {e.version}" for e in model.opset_import)
    producer = " ".join(p for p in (model.producer_name, model.producer_version) if p)
    facts = [("model", graph.name or "(unnamed)"), ("producer", producer or "-"),
             ("opsets", opsets or "-"), ("nodes", count_nodes(graph)),
             ("initializers", len(graph.initializer)), ("device", rep.device),
             ("profiling", "on" if getattr(rep, "profiling", False) else "off")]
    head = "<br>".join(f"<b>{_e(k)}</b>: {_e(v)}" for k, v in facts)
    inits = {t.name for t in graph.initializer}
    ios = [("input", vi) for vi in graph.input if vi.name not in inits]
    ios += [("output", vi) for vi in graph.output]
    rows = [[kind, vi.name, *value_type(vi)] for kind, vi in ios]
    return f"<p>{head}</p>\n" + table_html(["", "name", "type", "shape"], rows)


def cache_html(rep):
    """The compiled signatures (oldest first) with the cache's hit and miss counts."""
    info = rep.cache_info()
    summary = (f"<p><b>cache</b>: {_e(info['signatures'])} of at most {_e(info['max_signatures'])} "
               f"signature(s); {_e(info['hits'])} hit(s), {_e(info['misses'])} miss(es); "
               f"{_e(info['compile_seconds'])} s compiling</p>")
    rows = []
    for sig in rep.signatures():
        compiled = rep.compiled([(shape, dtype) for _, shape, dtype in sig])
        rows.append([signature_text(sig), len(compiled.kernels), f"{compiled.compile_seconds:.3f}"])
    if not rows:
        return summary
    return summary + "\n" + table_html(["signature", "kernels", "compile s"], rows)


def plan_html(rows):
    """The fusion plan: one table row per kernel."""
    body = [[r["kernel"], r["kind"], node_text(r), outputs_text(r), "yes" if r["compiled"] else "no",
             "" if r["us_per_call"] is None else f"{r['us_per_call']:.1f}"] for r in rows]
    return table_html(["kernel", "kind", "ONNX nodes", "outputs", "compiled", "µs/call"], body)


def source_html(source):
    """The generated module, highlighted with pygments when it is installed, else plain."""
    source = "\n".join(plain(line) for line in source.split("\n"))
    lines = source.count("\n") + 1
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        code = f"<pre>{html.escape(source)}</pre>"
    else:
        code = highlight(source, PythonLexer(), HtmlFormatter(noclasses=True))
    opened = " open" if lines <= OPEN_SOURCE_LINES else ""
    return (f"<details{opened}><summary><b>generated source</b> ({lines} lines)</summary>\n"
            f"{code}</details>")


def table_html(header, rows):
    """An HTML table with every cell escaped."""
    cell = 'style="text-align:left;vertical-align:top"'
    head = "".join(f"<th {cell}>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td {cell}>{_e(c)}</td>" for c in r) + "</tr>\n" for r in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"


def signature_text(signature):
    """'x: float32[2, 3], ...' for a signature of (name, shape, dtype)."""
    return ", ".join(f"{name}: {np.dtype(dtype)}{list(shape)}" for name, shape, dtype in signature)


def value_type(value_info):
    """(element type, shape) text of a graph input or output as declared."""
    from onnx import helper
    if not value_info.type.HasField("tensor_type"):
        return value_info.type.WhichOneof("value") or "?", "?"
    tt = value_info.type.tensor_type
    try:
        elem = helper.tensor_dtype_to_np_dtype(tt.elem_type).name
    except Exception:
        elem = f"elem_type {tt.elem_type}"
    if not tt.HasField("shape"):
        return elem, "?"
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    return elem, "[" + ", ".join(str(d) for d in dims) + "]"


def count_nodes(graph):
    """Nodes in the graph and its subgraphs."""
    total = 0
    for node in graph.node:
        total += 1
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                total += count_nodes(sub)
    return total


def __getattr__(name):
    """`onnxjit.explain.show_main` (the CLI, now onnxjit/tools/show.py), imported on first use so
    that the library never imports the tooling."""
    if name == "show_main":
        from .tools.show import show_main
        return show_main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":     # python -m onnxjit.explain MODEL.onnx: the same as `onnxjit show`
    from onnxjit.tools.show import show_main as _show_main
    sys.exit(_show_main())
