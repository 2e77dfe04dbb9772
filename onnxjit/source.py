"""Helpers for writing generated source: a line buffer and safe literals."""
from __future__ import annotations

import contextlib
import functools
import math
from importlib import resources
from pathlib import Path
from string import Template

import numpy as np

DTYPE_SRC = {np.dtype(t): f"__np.{np.dtype(t).name}" for t in (
    np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
    np.uint8, np.uint16, np.uint32, np.uint64)}
DTYPE_SRC[np.dtype(bool)] = "__np.bool_"


def dtype_src(dtype):
    """Source naming the dtype compiled code holds `dtype` in (float32 for narrow floats)."""
    from .ir import compute_dtype
    try:
        return DTYPE_SRC[compute_dtype(dtype)]
    except KeyError:
        raise TypeError(f"dtype {np.dtype(dtype)} has no compiled representation") from None


def lit(value):
    """Source for a plain number, bool, None or (nested) tuple of them; refuses anything else."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return repr(None if value is None else bool(value))
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "__np.nan"
        if math.isinf(value):
            return "__np.inf" if value > 0 else "(-__np.inf)"
        return repr(value)
    if isinstance(value, (tuple, list)):
        items = [lit(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise TypeError(f"refusing to write a {type(value).__name__} into generated source")


def scalar_lit(value, dtype):
    """Source for a scalar of the given dtype, e.g. `__np.float32(0.5)`."""
    from .ir import held
    dtype = np.dtype(dtype)
    value = held(np.asarray(value).astype(dtype)).item()
    if dtype == np.bool_:
        return lit(bool(value))
    return f"{dtype_src(dtype)}({lit(value)})"


@functools.lru_cache(maxsize=None)
def template(name):
    """A `string.Template` read from the shipped codegen_templates package."""
    return Template(templates_root().joinpath(name).read_text(encoding="utf-8"))


def fill(template_name, /, **fields):
    """The text of template `template_name` with its fields filled in. A line holding only `$field`
    whose value is a list of lines (a block) becomes those lines, each indented as the
    placeholder is (and no line at all for an empty list); other fields substitute as text."""
    out = []
    for line in template(template_name).template.split("\n"):
        key = line.strip()[1:]
        if line.strip().startswith("$") and isinstance(fields.get(key), list):
            indent = line[:len(line) - len(line.lstrip())]
            out += [indent + row if row else "" for row in fields[key]]
        else:
            out.append(Template(line).substitute(
                {k: v for k, v in fields.items() if not isinstance(v, list)}))
    return "\n".join(out)


def templates_root():
    """The folder of the templates: the checkout's top-level `codegen_templates/` when onnxjit is
    imported from a source tree (a git worktree beside an editable install reads its own), else
    the installed `onnxjit.codegen_templates` package (a wheel maps the templates into it)."""
    checkout = Path(__file__).resolve().parent.parent / "codegen_templates"
    if (checkout / "module.py.tmpl").is_file():      # the source tree onnxjit is imported from
        return checkout
    return resources.files("onnxjit.codegen_templates")


class LineBuffer:
    """Lines of source with an indentation level (after Inductor's IndentedBuffer)."""

    def __init__(self):
        self.lines = []
        self.level = 0

    def line(self, text=""):
        self.lines.append(("    " * self.level + text) if text else "")

    def splice(self, text):
        for row in text.rstrip("\n").split("\n"):
            self.line(row)

    @contextlib.contextmanager
    def indent(self, n=1):
        self.level += n
        try:
            yield
        finally:
            self.level -= n

    def getvalue(self):
        return "\n".join(self.lines) + "\n"
