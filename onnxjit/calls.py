"""Calls the Python driver makes itself, so that no per-model njit segment has to hold them.

- `library_call`: a library kernel called with variables and numbers; its machine code comes
  from the kernels' own cache, compiled once per install.
- `movement_call`: data movement (Concat, Reshape, Flatten, Split, block shuffles) in numpy or
  onnxjit's copy kernels becomes a shared kernel generic over its numbers (the sizes and axes
  are arguments), compiled once per machine for every model (fused.shared_kernel).

From Python, numbers arrive as int64 / float64 (tuples as UniTuple), so one specialization of the
callee serves every call; compiled code would specialize it on each literal value.
"""
from __future__ import annotations

import ast

from .source import template

# numpy functions of movement expressions (Numba compiles them for run-time sizes and axes).
MOVEMENT_FUNCTIONS = frozenset({"concatenate", "ascontiguousarray", "transpose"})
# ... and library kernels that may appear in them (module, function).
MOVEMENT_KERNELS = frozenset({("__k_movement", "concat")})


def library_call(expr):
    """(callee, argument sources) when `expr` is a single call of a library kernel whose arguments
    are variables or numbers, e.g. `__k_pool.maxpool(t3, (3, 3), (2, 2), None)`; else None.

    The Python driver can make such a call: one specialization of the kernel serves every call
    and every model, where compiled code would specialize it on each literal value (e.g. 12
    copies of sgemm.conv1x1_packed in ResNet-50, one per channel count). Anything else (a
    reshape, a numpy call, a bool or string flag) stays in compiled code.
    """
    node = _parse(expr)
    if not (isinstance(node, ast.Call) and not node.keywords
            and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
            and node.func.value.id.startswith("__k_")):
        return None
    args = []
    for arg in node.args:
        if not isinstance(arg, ast.Name):
            try:
                value = ast.literal_eval(arg)
            except (ValueError, TypeError, SyntaxError):
                return None
            if not _numeric(value):
                return None
        args.append(ast.get_source_segment(expr, arg))
    return ast.get_source_segment(expr, node.func), args


def movement_call(expr):
    """(params, body, argument sources) when `expr` is plain numpy data movement of variables,
    e.g. `__np.concatenate((t3, t4), axis=1)`; else None.

    `body` is `expr` with each variable replaced by a parameter a<i> and each number, or tuple
    of numbers, by a parameter p<j> (`__np.concatenate((a0, a1), axis=p0)`): the text of a
    kernel that serves every size. Allowed: MOVEMENT_FUNCTIONS, MOVEMENT_KERNELS, `.reshape`,
    slicing and tuples.
    """
    node = _parse(expr)
    if node is None:
        return None
    parametrize = _Parametrize(expr)
    try:
        body = parametrize.visit(node)
    except _NotMovement:
        return None
    if not any(p.startswith("a") for p in parametrize.params):
        return None
    return list(parametrize.params), ast.unparse(body), list(parametrize.params.values())


def movement_function(params, body):
    """A function source taking `params` and returning `body`, named by its caller."""
    return lambda name: template("movement_kernel.py.tmpl").substitute(
        name=name, params=", ".join(params), expr=body)


class _NotMovement(Exception):
    pass


class _Parametrize(ast.NodeTransformer):
    """Rewrites a movement expression over parameters; raises _NotMovement for anything else."""

    def __init__(self, expr):
        self.expr = expr
        self.params = {}      # parameter -> argument source, in order of appearance
        self.names = {}       # variable -> its parameter

    def visit(self, node):
        if _is_number(node):
            return self.param("p", node)
        kind = type(node).__name__
        if kind not in ("Call", "Name", "Tuple", "Subscript", "Slice", "Constant", "Load"):
            raise _NotMovement(kind)
        return super().visit(node)

    def param(self, prefix, node):
        name = f"{prefix}{sum(p.startswith(prefix) for p in self.params)}"
        self.params[name] = ast.get_source_segment(self.expr, node)
        return ast.Name(name, ast.Load())

    def visit_Name(self, node):
        if node.id.startswith("__"):
            raise _NotMovement(node.id)
        if node.id not in self.names:
            self.names[node.id] = self.param("a", node)
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


def _parse(expr):
    try:
        return ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None


def _numeric(value):
    """None, an int or float, or a tuple of them. Not bools or strings: from compiled code they
    are literals a kernel may prune branches on (Python passes plain bool and unicode types)."""
    if isinstance(value, tuple):
        return all(_numeric(v) for v in value)
    return value is None or type(value) in (int, float)
