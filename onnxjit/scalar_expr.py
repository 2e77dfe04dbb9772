"""Elementwise steps are data too: a scalar expression tree over the step's operands.

A lowering hands `ctx.elementwise` a tree built with the functions below and Python's
arithmetic operators (`from .. import scalar_expr as S` in onnxjit/ops):

    x, lo = S.operands(2)                      # the step's inputs 0 and 1, one element each
    S.lib("scalar", "maximum", x, lo)          # __k_scalar.maximum(x, lo)
    S.paren(S.cond(S.ge(x, zero), x, a * S.np("expm1", x)))   # (x if x >= z else a * ...)

Its leaves are operands (`Operand(i)`: input i of the step, rendered as the element the fused
loop reads) and constants (`Const`: a steps.Param, written by `source.lit`, from `S.lit`, or a
steps.Src typed scalar such as `__np.float32(0.5)`, from `S.scalar`); a str is refused
(DESIGN.md, Safety). Its nodes are calls (`Call`: library scalar functions `__k_<module>.<f>`,
numpy `__np.<f>` (scalar constructors included: `S.convert`), `__math.<f>` and the builtins
abs, min and max), operators (`BinOp`: + - * / ** & | ^, comparisons, `and`/`or`; `Unary`:
-, ~, not), conditional expressions (`Cond`) and parentheses a lowering asks for (`Paren`).

`render(e, names)` writes it, operand i as `names[i]`, with parentheses where Python's
precedence needs them and where a `Paren` stands (the ones the lowerings always wrote, e.g.
around a binary op: `(a + b)`); `modules(e)` are the library modules it calls. Comparisons
and boolean operators are functions (`S.lt`, `S.and_` ...): `==` and truth-testing a node
raise, so a comparison never silently becomes a Python bool.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import steps
from .ir import Value
from .source import dtype_src

BUILTINS = frozenset({"abs", "min", "max"})

# Python's precedence, low to high (a conditional expression 1 ... an atom 14).
PRECEDENCE = {"or": 2, "and": 3, "not": 4,
              "==": 5, "!=": 5, "<": 5, "<=": 5, ">": 5, ">=": 5,
              "|": 6, "^": 7, "&": 8, "+": 10, "-": 10, "*": 11, "/": 11, "**": 13}
COND, UNARY, ATOM = 1, 12, 14
COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def _binary(op):
    """The methods building `self op other` and `other op self` (a number becoming a `lit`)."""
    def forward(self, other):
        return BinOp(op, self, node(other))

    def reflected(self, other):
        return BinOp(op, node(other), self)
    return forward, reflected


class Scalar:
    """A node of a scalar expression; + - * / ** & | ^ (and their reflections), unary - and ~
    build on it, a number on the other side becoming a `lit`."""

    __add__, __radd__ = _binary("+")
    __sub__, __rsub__ = _binary("-")
    __mul__, __rmul__ = _binary("*")
    __truediv__, __rtruediv__ = _binary("/")
    __pow__, __rpow__ = _binary("**")
    __and__ = _binary("&")[0]
    __or__ = _binary("|")[0]
    __xor__ = _binary("^")[0]

    def __neg__(self):
        return Unary("-", self)

    def __invert__(self):
        return Unary("~", self)

    def __eq__(self, other):
        raise TypeError("compare scalar expressions with S.eq / S.ne, not ==")

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("a scalar expression has no truth value (S.and_, S.or_, S.cond build "
                        "boolean logic)")


@dataclass(frozen=True, eq=False)
class Operand(Scalar):
    """Input `index` of the step: the element the fused loop reads from it."""
    index: int


@dataclass(frozen=True, eq=False)
class Const(Scalar):
    """A steps.Param (written by `lit`) or steps.Src (a typed scalar, e.g. `__np.float32(0.5)`)."""
    leaf: object


@dataclass(frozen=True, eq=False)
class Call(Scalar):
    """`owner.function(args...)`; owner `__k_<module>`, `__np` or `__math`, or "" (a builtin)."""
    owner: str
    function: str
    args: tuple

    @property
    def library_module(self):
        return steps.library_module(self.owner)


@dataclass(frozen=True, eq=False)
class BinOp(Scalar):
    """`left op right` (op one of PRECEDENCE's binary operators)."""
    op: str
    left: Scalar
    right: Scalar


@dataclass(frozen=True, eq=False)
class Unary(Scalar):
    """`-x`, `~x` or `not x`."""
    op: str
    operand: Scalar


@dataclass(frozen=True, eq=False)
class Cond(Scalar):
    """`then if test else orelse`."""
    test: Scalar
    then: Scalar
    orelse: Scalar


@dataclass(frozen=True, eq=False)
class Paren(Scalar):
    """`(inner)`, written even where precedence does not need it."""
    inner: Scalar


# -- building ------------------------------------------------------------------------------------
def node(x):
    """`x` as a scalar node: a node as it is, a steps.Param / Src as a Const, a number, bool or
    None as a `lit`. Refuses text (DESIGN.md, Safety) and anything else."""
    if isinstance(x, Scalar):
        return x
    if isinstance(x, (steps.Param, steps.Src)):
        return Const(x)
    if isinstance(x, (str, bytes)):
        raise TypeError(f"refusing text {x!r} in a scalar expression: build a tree "
                        "(onnxjit.scalar_expr), literals with S.lit / S.scalar")
    if isinstance(x, (tuple, list, steps.Expr, Value)):
        raise TypeError(f"a {type(x).__name__} is not a scalar: use S.operand(i) for input i")
    return lit(x)


def operand(index):
    """Input `index` of the step."""
    return Operand(int(index))


def operands(n):
    """Inputs 0 ... n-1 of the step."""
    return tuple(Operand(i) for i in range(n))


def lit(value):
    """A plain number, bool or None, written as `source.lit` writes it (`0.5`, `True`, `__np.inf`);
    anything else is refused."""
    return Const(steps.param(value))


def scalar(value, dtype):
    """A scalar of `dtype` as compiled code writes it, e.g. `__np.float32(0.5)`."""
    return Const(steps.scalar(value, dtype))


def lib(module, function, *args):
    """`__k_<module>.<function>(args...)`: a scalar function of onnxjit.kernels."""
    return _call(f"__k_{_name(module)}", function, args)


def np(function, *args):
    """`__np.<function>(args...)`."""
    return _call("__np", function, args)


def math(function, *args):
    """`__math.<function>(args...)`."""
    return _call("__math", function, args)


def builtin(function, *args):
    """`abs(...)`, `min(...)` or `max(...)`."""
    if function not in BUILTINS:
        raise ValueError(f"{function!r} is not one of the builtins {sorted(BUILTINS)}")
    return _call("", function, args)


def convert(dtype, x):
    """`x` converted to the type compiled code holds `dtype` in, e.g. `__np.int64(x)`."""
    owner, function = dtype_src(dtype).split(".")
    return _call(owner, function, (x,))


def eq(a, b):
    return _binop("==", a, b)


def ne(a, b):
    return _binop("!=", a, b)


def lt(a, b):
    return _binop("<", a, b)


def le(a, b):
    return _binop("<=", a, b)


def gt(a, b):
    return _binop(">", a, b)


def ge(a, b):
    return _binop(">=", a, b)


def and_(a, b):
    return _binop("and", a, b)


def or_(a, b):
    return _binop("or", a, b)


def not_(x):
    return Unary("not", node(x))


def cond(test, then, orelse):
    """`then if test else orelse`."""
    return Cond(node(test), node(then), node(orelse))


def paren(x):
    """`(x)`: parentheses the source keeps though precedence may not need them."""
    return Paren(node(x))


def _call(owner, function, args):
    return Call(owner, _name(function), tuple(node(a) for a in args))


def _binop(op, a, b):
    return BinOp(op, node(a), node(b))


def _name(name):
    if not (isinstance(name, str) and name.isidentifier()):
        raise ValueError(f"{name!r} is not an identifier")
    return name


# -- walking and rendering -----------------------------------------------------------------------
def children(e):
    """The sub-expressions of `e`, in the order they are written."""
    if isinstance(e, Call):
        return e.args
    if isinstance(e, BinOp):
        return (e.left, e.right)
    if isinstance(e, Unary):
        return (e.operand,)
    if isinstance(e, Cond):
        return (e.then, e.test, e.orelse)
    if isinstance(e, Paren):
        return (e.inner,)
    return ()


def walk(e):
    """Every node of `e`, parents first, in written order."""
    yield e
    for c in children(e):
        yield from walk(c)


def modules(e):
    """The library modules (of onnxjit.kernels) `e` calls."""
    return {n.library_module for n in walk(e) if isinstance(n, Call) and n.library_module}


def operand_count(e):
    """One more than the highest operand index `e` reads (0 if none)."""
    return max((n.index + 1 for n in walk(e) if isinstance(n, Operand)), default=0)


def render(e, names):
    """Source of `e`, operand i written as `names[i]` (an element: a variable, `a0_[i0, i1]`
    or a constant's `scalar_lit`)."""
    if isinstance(e, Operand):
        return names[e.index]
    if isinstance(e, Const):
        return str(e.leaf)
    if isinstance(e, Call):
        prefix = f"{e.owner}." if e.owner else ""
        return f"{prefix}{e.function}({', '.join(render(a, names) for a in e.args)})"
    if isinstance(e, Paren):
        return f"({render(e.inner, names)})"
    if isinstance(e, Unary):
        operand = _wrap(e.operand, names, PRECEDENCE["not"] if e.op == "not" else UNARY)
        return f"not {operand}" if e.op == "not" else f"{e.op}{operand}"
    if isinstance(e, Cond):
        return (f"{_wrap(e.then, names, COND + 1)} if {_wrap(e.test, names, COND + 1)} "
                f"else {_wrap(e.orelse, names, COND)}")
    if isinstance(e, BinOp):
        p = PRECEDENCE[e.op]
        if e.op == "**":        # right-associative; its base is a primary, its exponent unary
            need = (ATOM, UNARY)
        elif e.op in COMPARISONS:   # never a chained comparison
            need = (p + 1, p + 1)
        else:                   # left-associative
            need = (p, p + 1)
        return f"{_wrap(e.left, names, need[0])} {e.op} {_wrap(e.right, names, need[1])}"
    raise TypeError(f"cannot render {e!r} as a scalar expression")


def _wrap(e, names, need):
    """`e` rendered, in parentheses when it binds less tightly than `need`."""
    text = render(e, names)
    return f"({text})" if _precedence(e, text) < need else text


def _precedence(e, text):
    if isinstance(e, BinOp):
        return PRECEDENCE[e.op]
    if isinstance(e, Unary):
        return PRECEDENCE["not"] if e.op == "not" else UNARY
    if isinstance(e, Cond):
        return COND
    if isinstance(e, Const) and text.startswith("-"):    # a negative number: `-0.5`
        return UNARY
    return ATOM
