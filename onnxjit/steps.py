"""Steps are data: what a lowering records for one array-producing step, read by every later stage.

A lowering describes an array step as an expression tree (`Expr`), built with the small
functions below and Python's own indexing (`from .. import steps as E` in onnxjit/ops):

    E.lib("tensor_misc", "det", E.contiguous(x).reshape(x3)).reshape(shape)
    E.numpy("concatenate", (a, b), axis=1)
    E.contiguous(x)[:, 0:2]

Its leaves are the Values the step reads (input slots once recorded: `Slot`), `Param`s (a
number, None, a bool, a tuple of them) and `Src` (source a lowering wrote through `scalar` or
`dtype`, e.g. `__np.float32(1.5)`); a str is refused (DESIGN.md, Safety). Its nodes are calls
of library kernels (`__k_<module>.<function>`) and numpy functions (`__np.<function>`),
methods (`.reshape`, `.transpose`), indexing and slicing, and tuples.

A call step (`specialize.Step` of kind "call") carries one of these as `step.op`, classified
from the tree (`op_of`):

- `LibraryCall`: a library kernel (`kernel` = (module of onnxjit.kernels, function)) and its
  arguments, each an input slot (an int: `step.inputs[i]`) or a typed `Param` (`param.value`),
  or `Src`. The Python driver may call it itself when every argument is a slot or a number
  (`driver_callable`); compile types its numbers from `param.value`.
- `Movement`: data movement (Concat, Reshape, Flatten, Split, block shuffles: only the numpy
  functions MOVEMENT_FUNCTIONS, the kernels MOVEMENT_KERNELS and `.reshape`, over slots and
  integers); emit renders it once as a shared kernel generic over its numbers (`kernel`) and
  as the driver's call of it.
- `ArrayExpr`: any other array expression (a library call wrapped in reshapes, numpy
  constructors), rendered as written inside compiled code.

Each renders itself (`render(names)`, the inputs' variables) and says which library modules it
calls (`modules`) and how many kernel calls it makes (`library_calls`), all from the tree.

An elementwise step (kind "ew") is a tree too, of scalars: onnxjit/scalar_expr.py's nodes over
the step's operands, with the same `Param` and `Src` leaves; the fused kernels render it
(`scalar_expr.render`) and its library modules come from it (`scalar_expr.modules`). Nothing
after lowering reads source text back.
"""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass

import numpy as np

from .ir import Value
from .source import dtype_src, lit, scalar_lit

# numpy functions of movement expressions (Numba compiles them for run-time sizes and axes).
MOVEMENT_FUNCTIONS = frozenset({"concatenate", "ascontiguousarray", "transpose"})
# ... and library kernels that may appear in them (module, function).
MOVEMENT_KERNELS = frozenset({("movement", "concat")})


# -- the expression tree -------------------------------------------------------------------------
def library_module(owner):
    """The kernel module a call's owner names (`__k_pool` -> "pool"), or None (`__np`, ...)."""
    return owner[4:] if owner.startswith("__k_") else None


class Expr:
    """A node of an array expression; `x.reshape(shape)`, `x.transpose(perm)`, `x.view(dtype)`
    and `x[...]` (ints, Python slices, `NONE` for a bound written None) build on it."""

    def reshape(self, shape):
        return Method(self, "reshape", (node(shape),))

    def transpose(self, perm):
        return Method(self, "transpose", (node(perm),))

    def view(self, dtype):
        """The same bytes as another dtype (`dtype`: a Src, e.g. steps.dtype(np.int32))."""
        return Method(self, "view", (node(dtype),))

    def __getitem__(self, index):
        items = index if isinstance(index, tuple) else (index,)
        return Index(self, tuple(_index_item(i) for i in items))


@dataclass(frozen=True)
class Param(Expr):
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


@dataclass(frozen=True)
class Src(Expr):
    """Source text a lowering wrote as an argument (a dtype name, a scalar constructor): made by
    `scalar` and `dtype`, never holding a kernel call."""
    text: str

    def __str__(self):
        return self.text


@dataclass(frozen=True, eq=False)
class Input(Expr):
    """A Value the expression reads (`ctx.call` turns it into a Slot)."""
    value: object


@dataclass(frozen=True)
class Slot(Expr):
    """Input slot `index` of the step: `step.inputs[index]`, rendered as its variable."""
    index: int


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """`owner.function(args..., keyword=value...)`; owner `__np` or `__k_<module>`."""
    owner: str
    function: str
    args: tuple
    keywords: tuple = ()     # ((name, Expr), ...)

    @property
    def library_module(self):
        return library_module(self.owner)


@dataclass(frozen=True, eq=False)
class Method(Expr):
    """`obj.name(args...)`."""
    obj: Expr
    name: str
    args: tuple


@dataclass(frozen=True, eq=False)
class Index(Expr):
    """`obj[items...]`: each item an Expr or a Slice."""
    obj: Expr
    items: tuple


@dataclass(frozen=True, eq=False)
class Slice:
    """`start:stop[:step]` inside an Index; an omitted part is None (NONE writes `None`)."""
    start: Expr = None
    stop: Expr = None
    step: Expr = None


@dataclass(frozen=True, eq=False)
class Tuple(Expr):
    """`(items...)`, with a comma after the last item when `trailing_comma` (or one item)."""
    items: tuple
    trailing_comma: bool = False


NONE = Param(None)


# -- building ------------------------------------------------------------------------------------
def node(x):
    """`x` as an Expr: an Expr as it is, a Value as an Input, a number, None, bool or tuple of
    them as a Param, a tuple holding expressions as a Tuple. Refuses text (use `scalar`/`dtype`)."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, Value):
        return Input(x)
    if isinstance(x, (tuple, list)) and not _plain(x):
        return Tuple(tuple(node(i) for i in x))
    return param(x)


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


def lib(module, function, *args):
    """`__k_<module>.<function>(args...)`: a library kernel of onnxjit.kernels."""
    return Call(f"__k_{module}", function, tuple(node(a) for a in args))


def numpy(function, *args, **keywords):
    """`__np.<function>(args..., keyword=value...)`."""
    return Call("__np", function, tuple(node(a) for a in args),
                tuple((k, node(v)) for k, v in keywords.items()))


def contiguous(x):
    """`__np.ascontiguousarray(x)`."""
    return numpy("ascontiguousarray", x)


def reshape(x, shape):
    """`x.reshape(shape)`."""
    return node(x).reshape(shape)


def item(x):
    """The element of a one-element run-time array (a scalar input): `contiguous(x).reshape(1)[0]`."""
    return contiguous(x).reshape(1)[0]


def tuple_of(*items, trailing_comma=False):
    """`(items...)`; a tuple of expressions given as a Python tuple has no trailing comma."""
    return Tuple(tuple(node(i) for i in items), trailing_comma)


def slot(index):
    """Input slot `index` of a step recorded with explicit inputs (`ctx.record`)."""
    return Slot(index)


def scalar(value, dtype):
    """A scalar of `dtype` as compiled code writes it, e.g. `__np.float32(0.5)`."""
    return Src(scalar_lit(value, dtype))


def dtype(dt):
    """The dtype compiled code holds `dt` in, e.g. `__np.float32`."""
    return Src(dtype_src(dt))


def _index_item(i):
    if isinstance(i, slice):
        return Slice(*(None if v is None else node(v) for v in (i.start, i.stop, i.step)))
    return node(i)


def _plain(x):
    """A number, None, bool, or (nested) tuple of them: one Param."""
    if isinstance(x, (tuple, list)):
        return all(_plain(i) for i in x)
    return x is None or isinstance(x, (bool, int, float, np.bool_, np.integer, np.floating))


# -- walking -------------------------------------------------------------------------------------
def children(e):
    """The sub-expressions of `e`, in the order they are written."""
    if isinstance(e, Call):
        return e.args + tuple(v for _, v in e.keywords)
    if isinstance(e, Method):
        return (e.obj,) + e.args
    if isinstance(e, Index):
        return (e.obj,) + e.items
    if isinstance(e, Slice):
        return tuple(v for v in (e.start, e.stop, e.step) if v is not None)
    if isinstance(e, Tuple):
        return e.items
    return ()


def walk(e):
    """Every node of `e`, parents first, in written order."""
    yield e
    for c in children(e):
        yield from walk(c)


def replace_inputs(e, slot_of):
    """`e` with each Input(v) replaced by Slot(slot_of(v))."""
    def sub(x):
        return None if x is None else replace_inputs(x, slot_of)
    if isinstance(e, Input):
        return Slot(slot_of(e.value))
    if isinstance(e, Call):
        return Call(e.owner, e.function, tuple(map(sub, e.args)),
                    tuple((k, sub(v)) for k, v in e.keywords))
    if isinstance(e, Method):
        return Method(sub(e.obj), e.name, tuple(map(sub, e.args)))
    if isinstance(e, Index):
        return Index(sub(e.obj), tuple(map(sub, e.items)))
    if isinstance(e, Slice):
        return Slice(sub(e.start), sub(e.stop), sub(e.step))
    if isinstance(e, Tuple):
        return Tuple(tuple(map(sub, e.items)), e.trailing_comma)
    return e


def inputs_of(e):
    """The Values `e` reads, each once, in written order."""
    seen = {}
    for n in walk(e):
        if isinstance(n, Input):
            seen.setdefault(id(n.value), n.value)
    return list(seen.values())


def render(e, names, compiled=True):
    """Source of `e`, input slot i written as `names[i]`; `compiled`: for compiled code (library
    kernels' int arguments as int64, `kernel_arg`), else for the Python driver (plain ints)."""
    def r(x):
        return render(x, names, compiled)
    if isinstance(e, Slot):
        return names[e.index]
    if isinstance(e, (Param, Src)):
        return str(e)
    if isinstance(e, Call):
        arg = (lambda a: kernel_arg(a, names)) if e.library_module and compiled else r
        args = [arg(a) for a in e.args] + [f"{k}={arg(v)}" for k, v in e.keywords]
        return f"{e.owner}.{e.function}({', '.join(args)})"
    if isinstance(e, Method):
        return f"{r(e.obj)}.{e.name}({', '.join(map(r, e.args))})"
    if isinstance(e, Index):
        return f"{r(e.obj)}[{', '.join(map(r, e.items))}]"
    if isinstance(e, Slice):
        text = f"{'' if e.start is None else r(e.start)}:{'' if e.stop is None else r(e.stop)}"
        return text if e.step is None else f"{text}:{r(e.step)}"
    if isinstance(e, Tuple):
        comma = "," if e.trailing_comma or len(e.items) == 1 else ""
        return f"({', '.join(map(r, e.items))}{comma})"
    raise TypeError(f"cannot render {e!r}: an Input is rendered once recorded as a Slot")


def kernel_modules(e):
    """({library module}, number of library kernel calls) of an expression."""
    calls = [n.library_module for n in walk(e) if isinstance(n, Call) and n.library_module]
    return set(calls), len(calls)


# -- what a call step runs -----------------------------------------------------------------------
def render_arg(arg, names):
    """Source of one argument: an input slot's variable, a Param or Src as written."""
    return names[arg] if isinstance(arg, int) else str(arg)


def kernel_arg(arg, names):
    """Source of one argument of a library kernel called from compiled code: as `render_arg`
    (or `render`, for an Expr), except that integers are written `__np.int64(8)`.

    Numba types an integer constant in compiled code as a literal (`Literal[int](8)`), and a
    dispatcher called with a literal compiles a specialization for that value: every model
    size then compiled its own copy of a heavy kernel (sgemm_packed had seven, one per `n`),
    where the Python driver's calls, which pass plain ints, share one int64 specialization.
    Bools stay literal: kernels prune branches on them.  Not for the driver (render with
    compiled=False): there a Python int is typed int64 anyway, and making and typing np.int64
    objects cost a call ~0.2 us an int (2.5 us for a pool's twelve)."""
    if isinstance(arg, int) and not isinstance(arg, bool):
        return names[arg]
    if isinstance(arg, Param) and arg.source is None and _has_int(arg.value):
        return _int64_lit(arg.value)
    return render(arg, names) if isinstance(arg, Expr) else str(arg)


def _has_int(value):
    if isinstance(value, tuple):
        return any(_has_int(v) for v in value)
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _int64_lit(value):
    if isinstance(value, tuple):
        items = [_int64_lit(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return f"__np.int64({int(value)})"
    return lit(value)


@dataclass(eq=False)
class LibraryCall:
    """`__k_<module>.<function>(args...)`."""
    kernel: tuple          # (module of onnxjit.kernels, function)
    args: list             # slot index | Param | Src
    names: tuple = ()      # optional argument names (e.g. "bias", "residual"), for readers

    def render(self, names, compiled=True):
        module, function = self.kernel
        arg = kernel_arg if compiled else render_arg
        return f"__k_{module}.{function}({', '.join(arg(a, names) for a in self.args)})"

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
class _ExprOp:
    """An op holding an expression over input slots, rendered as written."""
    expr: Expr

    def render(self, names, compiled=True):
        return render(self.expr, names, compiled)

    @property
    def modules(self):
        return kernel_modules(self.expr)[0]

    @property
    def library_calls(self):
        return kernel_modules(self.expr)[1]


class ArrayExpr(_ExprOp):
    """Any other array expression over input slots, rendered as written inside compiled code."""


class Movement(_ExprOp):
    """Data movement over input slots: rendered as written, and as a shared kernel generic over
    its numbers (`kernel`)."""

    def kernel(self, names):
        """(params, body, arguments) of the shared kernel running this movement for the
        variables `names` of the inputs: each variable becomes a parameter a<i>, each integer or
        tuple of integers p<j>, e.g. `__np.concatenate((a0, a1), axis=p0)` with arguments
        ["t4", "t15", Param(1)]."""
        parametrize = _Parametrize(names)
        body = parametrize.visit(self.expr)
        return list(parametrize.params), ast.unparse(body), list(parametrize.params.values())

    @property
    def reshape_only(self):
        """It only views one input in another shape (`contiguous(x).reshape(shape)` or
        `x.reshape(shape)`, shape a constant): the Python driver runs it as numpy, which costs
        less than a compiled call (0.2 against 0.8 us)."""
        e = self.expr
        if not (isinstance(e, Method) and e.name == "reshape" and len(e.args) == 1
                and isinstance(e.args[0], Param)):
            return False
        obj = e.obj
        if (isinstance(obj, Call) and obj.owner == "__np" and obj.function == "ascontiguousarray"
                and len(obj.args) == 1 and not obj.keywords):
            obj = obj.args[0]
        return isinstance(obj, Slot)


class Opaque:
    """The op of a step another back end runs from the step's meta (onnxjit/cuda): nothing for
    the CPU emitter to render, no library calls."""
    modules = frozenset()
    library_calls = 0

    def render(self, names, compiled=True):
        raise TypeError("a step run by another back end (its meta) has no CPU source")


OPAQUE = Opaque()


def op_of(expr):
    """The op of a call step running `expr` (its inputs as Slots): a LibraryCall when it is one
    kernel call of slots and numbers, a Movement when it only moves data, else an ArrayExpr."""
    call = _library_call(expr)
    if call is not None:
        return call
    if _is_movement(expr):
        return Movement(expr)
    return ArrayExpr(expr)


def _library_call(e):
    if not (isinstance(e, Call) and e.library_module and not e.keywords):
        return None
    if not all(isinstance(a, Slot) or isinstance(a, Param) and a.numeric for a in e.args):
        return None
    return LibraryCall((e.library_module, e.function),
                       [a.index if isinstance(a, Slot) else a for a in e.args])


def _is_movement(e):
    slots = [n.index for n in walk(e) if isinstance(n, Slot)]
    parametrize = _Parametrize([f"s{i}" for i in range(max(slots, default=-1) + 1)])
    try:
        parametrize.visit(e)
    except _NotMovement:
        return False
    return any(p.startswith("a") for p in parametrize.params)


class _NotMovement(Exception):
    pass


class _Parametrize:
    """A movement expression as a Python tree over parameters: each input variable a<i> (one per
    variable), each integer or tuple of integers p<j>, None as written; raises _NotMovement for
    anything else (floats, bools, Src, other functions)."""

    def __init__(self, names):
        self.names = names
        self.params = {}      # parameter -> argument (variable name or Param), in order
        self.vars = {}        # variable -> its parameter

    def param(self, prefix, arg):
        name = f"{prefix}{sum(p.startswith(prefix) for p in self.params)}"
        self.params[name] = arg
        return ast.Name(name, ast.Load())

    def visit(self, e):
        if _integers(e):
            return self.param("p", Param(_value(e)))
        if isinstance(e, Slot):
            var = self.names[e.index]
            if var not in self.vars:
                self.vars[var] = self.param("a", var)
            return self.vars[var]
        if isinstance(e, Param) and e.value is None:
            return ast.Constant(None)
        if isinstance(e, Param) and isinstance(e.value, tuple):
            return ast.Tuple([self.visit(Param(v)) for v in e.value], ast.Load())
        if isinstance(e, Tuple):
            return ast.Tuple([self.visit(i) for i in e.items], ast.Load())
        if isinstance(e, Call):
            return self.visit_call(e)
        if isinstance(e, Method) and e.name == "reshape":
            func = ast.Attribute(self.visit(e.obj), e.name, ast.Load())
            return ast.Call(func, [self.visit(a) for a in e.args], [])
        if isinstance(e, Index):
            value = self.visit(e.obj)
            items = e.items
            if len(items) > 1 and all(_integers(i) for i in items):
                index = self.param("p", Param(tuple(_value(i) for i in items)))
            elif len(items) > 1:
                index = ast.Tuple([self.visit(i) for i in items], ast.Load())
            else:
                index = self.visit(items[0])
            return ast.Subscript(value, index, ast.Load())
        if isinstance(e, Slice):
            return ast.Slice(*(None if v is None else self.visit(v)
                               for v in (e.start, e.stop, e.step)))
        raise _NotMovement(type(e).__name__)

    def visit_call(self, e):
        module = e.library_module
        if not (e.owner == "__np" and e.function in MOVEMENT_FUNCTIONS
                or (module, e.function) in MOVEMENT_KERNELS):
            raise _NotMovement(f"{e.owner}.{e.function}")
        if any(k != "axis" for k, _ in e.keywords):
            raise _NotMovement("keyword")
        args = [self.visit(a) for a in e.args]
        keywords = [ast.keyword(k, self.visit(v)) for k, v in e.keywords]
        func = ast.Attribute(ast.Name(e.owner, ast.Load()), e.function, ast.Load())
        return ast.Call(func, args, keywords)


def _integers(e):
    """An integer, or a tuple of integers: an argument from Python rather than code."""
    if isinstance(e, Tuple):
        return all(_integers(i) for i in e.items)
    return isinstance(e, Param) and _int_value(e.value)


def _int_value(v):
    if isinstance(v, tuple):
        return all(_int_value(i) for i in v)
    return type(v) is int


def _value(e):
    return tuple(_value(i) for i in e.items) if isinstance(e, Tuple) else e.value


def _numeric(value):
    if isinstance(value, tuple):
        return all(_numeric(v) for v in value)
    # a NaN or infinity is written `__np.nan` / `__np.inf`: compiled code holds it
    return value is None or type(value) is int or type(value) is float and math.isfinite(value)

