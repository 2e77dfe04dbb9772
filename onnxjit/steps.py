"""Steps are data: what a lowering records for one array-producing step, read by every later stage.

A call step (`specialize.Step` of kind "call") carries one of these as `step.op`:

- `LibraryCall`: a library kernel (`kernel` = (module of onnxjit.kernels, function)) and its
  arguments, each an input slot (an int: `step.inputs[i]`) or a typed `Param` (a number, None,
  a bool, a tuple of them: `param.value`), or `Src` (source a lowering wrote, e.g. a dtype
  name). The Python driver may call it itself when every argument is a slot or a number
  (`driver_callable`); compile types its numbers from `param.value`.
- `Movement`: data movement (Concat, Reshape, Flatten, Split, block shuffles) as an expression
  tree over the input slots; emit renders it once as a shared kernel generic over its numbers
  (`movement_kernel`) and as the driver's call of it.
- `ArrayExpr`: any other array expression (a library call wrapped in reshapes, numpy
  constructors): source with `{i}` slots, the library modules it uses and how many kernel calls
  it makes, rendered as written inside compiled code.

Emit, compile and explain read these fields; nothing after lowering parses source text. The
lowering-facing `LoweringContext.call(source, ...)` still accepts a source fragment with `{i}`
slots: `from_fragment` reads that fragment once, when the lowering hands it over, into one of
the three (a compatibility layer for lowerings not yet written with `ctx.kernel`).
"""
from __future__ import annotations

import ast
import copy
import math
from dataclasses import dataclass, field

import numpy as np

from .source import lit

# numpy functions of movement expressions (Numba compiles them for run-time sizes and axes).
MOVEMENT_FUNCTIONS = frozenset({"concatenate", "ascontiguousarray", "transpose"})
# ... and library kernels that may appear in them (module, function).
MOVEMENT_KERNELS = frozenset({("__k_movement", "concat")})


@dataclass(frozen=True)
class Param:
    """A typed compile-time parameter of a step: `value` is None, a bool, an int, a float or a
    tuple of them; `source` is how the lowering wrote it (default: `lit(value)`)."""
    value: object
    source: str = None

    def __str__(self):
        return self.source if self.source is not None else lit(self.value)

    @property
    def numeric(self):
        """None, an int or float, or a tuple of them: what the Python driver may pass (bools and
        strings stay in compiled code, where a kernel may prune branches on their literals)."""
        return _numeric(self.value)


def param(value):
    """`value` as a Param: numpy numbers become Python's, lists tuples; anything else (a string,
    an array) is refused, as `lit` refuses it (DESIGN.md, Safety)."""
    def plain(v):
        if v is None or isinstance(v, (bool, np.bool_)):
            return None if v is None else bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)):
            return float(v)
        if isinstance(v, (tuple, list)):
            return tuple(plain(x) for x in v)
        raise TypeError(f"refusing a {type(v).__name__} as a kernel parameter")
    return value if isinstance(value, (Param, Src)) else Param(plain(value))


@dataclass(frozen=True)
class Src:
    """Source text a lowering wrote as an argument (a dtype name, a scalar constructor)."""
    text: str

    def __str__(self):
        return self.text


def render_arg(arg, names):
    """Source of one argument: an input slot's variable, a Param or Src as written."""
    return names[arg] if isinstance(arg, int) else str(arg)


@dataclass(eq=False)
class LibraryCall:
    """`__k_<module>.<function>(args...)`."""
    kernel: tuple          # (module of onnxjit.kernels, function)
    args: list             # slot index | Param | Src
    names: tuple = ()      # optional argument names (e.g. "bias", "residual"), for readers

    def render(self, names):
        module, function = self.kernel
        return f"__k_{module}.{function}({', '.join(render_arg(a, names) for a in self.args)})"

    @property
    def modules(self):
        return {self.kernel[0]}

    @property
    def library_calls(self):
        return 1

    @property
    def driver_callable(self):
        """Every argument a variable or a number: the Python driver can make the call, one
        specialization of the kernel serving every call and model."""
        return all(isinstance(a, int) or isinstance(a, Param) and a.numeric for a in self.args)


@dataclass(eq=False)
class Movement:
    """Data movement: `text` (source with `{i}` slots, as the lowering wrote it) and its tree,
    where input slot i is the name `SLOT_i`."""
    text: str
    tree: ast.expr
    source: str            # `text` with the slots named, which `tree` was read from
    modules: set = field(default_factory=set)
    library_calls: int = 0

    def render(self, names):
        return self.text.format(*names)

    def kernel(self, names):
        """(params, body, arguments) of the shared kernel running this movement for the
        variables `names` of the inputs: each variable becomes a parameter a<i>, each number or
        tuple of numbers p<j>, e.g. `__np.concatenate((a0, a1), axis=p0)` with arguments
        ["t4", "t15", Param(1)]."""
        tree = _Substitute(names).visit(copy.deepcopy(self.tree))
        parametrize = _Parametrize(self.source)
        body = parametrize.visit(tree)
        return list(parametrize.params), ast.unparse(body), list(parametrize.params.values())


@dataclass(eq=False)
class ArrayExpr:
    """Any other array expression, rendered as written: `text` with `{i}` slots."""
    text: str
    modules: set = field(default_factory=set)
    library_calls: int = 0

    def render(self, names):
        return self.text.format(*names)


SLOT = "SLOT_{}"


def from_fragment(text, inputs):
    """The structured op of a call step a lowering wrote as source `text` over `{i}` slots.

    This reads the lowering's fragment (never emitted code) once, when it is handed over."""
    source = text.format(*(SLOT.format(i) if v is not None else "None"
                           for i, v in enumerate(inputs)))
    tree = _parse(source)
    if tree is None:
        return ArrayExpr(text)
    modules, calls = kernel_modules(tree)
    call = _library_call(tree, source)
    if call is not None:
        return call
    if _is_movement(tree, source):
        return Movement(text, tree, source, modules, calls)
    return ArrayExpr(text, modules, calls)


def kernel_modules(tree):
    """({library module}, number of kernel references) named in a fragment's tree."""
    modules, count = set(), 0
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id.startswith("__k_")):
            modules.add(node.value.id[4:])
            count += 1
    return modules, count


def fragment_modules(text, n_inputs):
    """The library modules a scalar (elementwise) fragment over `{i}` slots calls."""
    tree = _parse(text.format(*(SLOT.format(i) for i in range(n_inputs))))
    return kernel_modules(tree)[0] if tree is not None else set()


def _slot(node):
    if isinstance(node, ast.Name) and node.id.startswith("SLOT_"):
        return int(node.id[5:])
    return None


def _library_call(node, source):
    if not (isinstance(node, ast.Call) and not node.keywords
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id.startswith("__k_")):
        return None
    args = []
    for arg in node.args:
        slot = _slot(arg)
        if slot is not None:
            args.append(slot)
            continue
        try:
            value = ast.literal_eval(arg)
        except (ValueError, TypeError, SyntaxError):
            return None
        if not _numeric(value):
            return None
        args.append(Param(value, ast.get_source_segment(source, arg)))
    return LibraryCall((node.func.value.id[4:], node.func.attr), args)


def _is_movement(tree, source):
    try:
        parametrize = _Parametrize(source)
        parametrize.visit(copy.deepcopy(tree))
    except _NotMovement:
        return False
    return any(p.startswith("a") for p in parametrize.params)


class _NotMovement(Exception):
    pass


class _Substitute(ast.NodeTransformer):
    """Input slots replaced by their variables' names."""

    def __init__(self, names):
        self.names = names

    def visit_Name(self, node):
        slot = _slot(node)
        return ast.Name(self.names[slot], ast.Load()) if slot is not None else node


class _Parametrize(ast.NodeTransformer):
    """Rewrites a movement expression over parameters; raises _NotMovement for anything else."""

    def __init__(self, source):
        self.source = source
        self.params = {}      # parameter -> argument (variable name or Param), in order
        self.names = {}       # variable -> its parameter

    def visit(self, node):
        if _is_number(node):
            return self.param("p", Param(ast.literal_eval(node),
                                         ast.get_source_segment(self.source, node)))
        kind = type(node).__name__
        if kind not in ("Call", "Name", "Tuple", "Subscript", "Slice", "Constant", "Load"):
            raise _NotMovement(kind)
        return super().visit(node)

    def param(self, prefix, arg):
        name = f"{prefix}{sum(p.startswith(prefix) for p in self.params)}"
        self.params[name] = arg
        return ast.Name(name, ast.Load())

    def visit_Name(self, node):
        if node.id.startswith("__"):
            raise _NotMovement(node.id)
        if node.id not in self.names:
            self.names[node.id] = self.param("a", node.id)
        return self.names[node.id]

    def visit_Constant(self, node):
        if node.value is not None:
            raise _NotMovement(repr(node.value))
        return node

    def visit_Call(self, node):
        func = node.func
        module = (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                  and func.value.id)
        known = (module == "__np" and func.attr in MOVEMENT_FUNCTIONS
                 or (module, func.attr) in MOVEMENT_KERNELS)
        if not (known or isinstance(func, ast.Attribute) and func.attr == "reshape"):
            raise _NotMovement(ast.unparse(func))
        if any(k.arg != "axis" for k in node.keywords):
            raise _NotMovement("keyword")
        if not known:
            func.value = self.visit(func.value)
        node.args = [self.visit(a) for a in node.args]
        for k in node.keywords:
            k.value = self.visit(k.value)
        return node


def _is_number(node):
    """A number, or a tuple of numbers: an argument from Python rather than text."""
    if isinstance(node, ast.Tuple):
        return all(_is_number(e) for e in node.elts)
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return False
    return type(value) is int


def _parse(text):
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _numeric(value):
    if isinstance(value, tuple):
        return all(_numeric(v) for v in value)
    # a NaN or infinity is written `__np.nan` / `__np.inf`: compiled code holds it
    return value is None or type(value) is int or type(value) is float and math.isfinite(value)
