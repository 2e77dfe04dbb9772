"""Steps are data: lowerings build expression trees (onnxjit/steps.py for array steps,
onnxjit/scalar_expr.py for elementwise ones), classified, rendered and parametrized from the
tree; no lowering hands over source text."""
import ast
import operator
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from onnxjit import fused, plan
from onnxjit import scalar_expr as S
from onnxjit import steps as E
from onnxjit.ir import Value
from onnxjit.specialize import LoweringContext, Program
from onnxjit.steps import ArrayExpr, LibraryCall, Movement, Param

PACKAGE = Path(__file__).resolve().parent.parent / "onnxjit"
OPS = PACKAGE / "ops"
LOWERINGS = sorted(OPS.glob("*.py")) + sorted((PACKAGE / "cuda").glob("*.py"))


def op(expr):
    """The op of `expr` over explicit slots (E.slot)."""
    return E.op_of(expr)


def names(n):
    return [f"t{i}" for i in range(n)]


S0, S1 = E.slot(0), E.slot(1)


@pytest.mark.parametrize("expr,kind,text,modules,calls", [
    (E.lib("pool", "maxpool", S0, (3, 3), 1.5, None), LibraryCall,
     "__k_pool.maxpool(t0, (__np.int64(3), __np.int64(3)), 1.5, None)", {"pool"}, 1),
    (E.lib("reduce", "cumulative", S0, S1, True, False), ArrayExpr,          # bools stay literal
     "__k_reduce.cumulative(t0, t1, True, False)", {"reduce"}, 1),
    (E.lib("resize", "nearest", S0, E.scalar(0.5, np.float32)), ArrayExpr,    # source argument
     "__k_resize.nearest(t0, __np.float32(0.5))", {"resize"}, 1),
    (E.lib("tensor_misc", "det", E.contiguous(S0).reshape((6, 4))).reshape((2, 3)), ArrayExpr,
     "__k_tensor_misc.det(__np.ascontiguousarray(t0).reshape((6, 4))).reshape((2, 3))",
     {"tensor_misc"}, 1),
    (E.lib("normalization", "reshape3", E.lib("normalization", "layer_norm", S0)[0], (2,)),
     ArrayExpr, "__k_normalization.reshape3(__k_normalization.layer_norm(t0)[0], (__np.int64(2),))",
     {"normalization"}, 2),
    (E.numpy("full", (2, 3), E.scalar(1.5, np.float32)), ArrayExpr,
     "__np.full((2, 3), __np.float32(1.5))", set(), 0),
    (E.numpy("concatenate", (S0, S1), axis=1), Movement,
     "__np.concatenate((t0, t1), axis=1)", set(), 0),
    (E.lib("movement", "concat", E.tuple_of(E.contiguous(S0).reshape((2, 3)), S1,
                                            trailing_comma=True)).reshape((2, 6)), Movement,
     "__k_movement.concat((__np.ascontiguousarray(t0).reshape((2, 3)), t1,)).reshape((2, 6))",
     {"movement"}, 1),
    (E.contiguous(S0[:, 0:2, 3:E.NONE:-1, ::2, 0]), Movement,
     "__np.ascontiguousarray(t0[:, 0:2, 3:None:-1, ::2, 0])", set(), 0),
    (E.contiguous(S0).reshape((4,)).view(E.dtype(np.int32)), ArrayExpr,
     "__np.ascontiguousarray(t0).reshape((4,)).view(__np.int32)", set(), 0),
    (E.tuple_of(E.contiguous(S0[0:1]), E.contiguous(S0[1:3]), trailing_comma=True), Movement,
     "(__np.ascontiguousarray(t0[0:1]), __np.ascontiguousarray(t0[1:3]),)", set(), 0),
])
def test_classification_rendering_and_modules(expr, kind, text, modules, calls):
    got = op(expr)
    assert type(got) is kind
    assert got.render(names(2)) == text
    assert set(got.modules) == modules and got.library_calls == calls


def test_library_calls_in_compiled_code_pass_int64_not_literals():
    """A library kernel called from compiled code with a literal int would compile one
    specialization per value; ints are written as int64, bools and floats as they are."""
    call = op(E.lib("sgemm", "sgemm_packed", S0, S1, 8, None, True, (1, 2.5, (3,))))
    text = call.render(["x", "w"])
    assert text == ("__k_sgemm.sgemm_packed(x, w, __np.int64(8), None, True, "
                    "(__np.int64(1), 2.5, (__np.int64(3),)))")
    tree = ast.parse(text, mode="eval")
    ints = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int]
    wrapped = [n.args[0] for n in ast.walk(tree) if isinstance(n, ast.Call)
               and isinstance(n.func, ast.Attribute) and n.func.attr == "int64"]
    assert ints and all(any(i is w for w in wrapped) for i in ints)


def test_library_call_arguments():
    call = op(E.lib("pool", "maxpool", S1, (3, 3), S0, -2))
    assert call.kernel == ("pool", "maxpool")
    assert call.args == [1, Param((3, 3)), 0, Param(-2)] and call.driver_callable
    nan = op(E.lib("pool", "maxpool", S0, float("nan")))     # compiled code holds a NaN
    assert isinstance(nan, ArrayExpr) and nan.render(["t0"]) == "__k_pool.maxpool(t0, __np.nan)"


@pytest.mark.parametrize("expr,params,body,args", [
    (E.numpy("concatenate", (S0, S1), axis=1), ["a0", "a1", "p0"],
     "__np.concatenate((a0, a1), axis=p0)", ["t0", "t1", "1"]),
    (E.lib("movement", "concat", E.tuple_of(E.contiguous(S0).reshape((1, 35)),
                                            E.contiguous(S1).reshape((1, 35)),
                                            trailing_comma=True)).reshape((1, 10, 7)),
     ["a0", "p0", "a1", "p1", "p2"],
     "__k_movement.concat((__np.ascontiguousarray(a0).reshape(p0), "
     "__np.ascontiguousarray(a1).reshape(p1))).reshape(p2)",
     ["t0", "(1, 35)", "t1", "(1, 35)", "(1, 10, 7)"]),
    (E.contiguous(S0).reshape((1, 4, 28)), ["a0", "p0"],
     "__np.ascontiguousarray(a0).reshape(p0)", ["t0", "(1, 4, 28)"]),
    (E.tuple_of(E.contiguous(S0[:, 0:2]), E.contiguous(S0[:, 2:-1]), trailing_comma=True),
     ["a0", "p0", "p1", "p2", "p3"],
     "(__np.ascontiguousarray(a0[:, p0:p1]), __np.ascontiguousarray(a0[:, p2:p3]))",
     ["t0", "0", "2", "2", "-1"]),
    (E.contiguous(E.numpy("transpose", E.contiguous(S0).reshape((1, 2, 2)), (0, 2, 1)))
     .reshape((1, 4)), ["a0", "p0", "p1", "p2"],
     "__np.ascontiguousarray(__np.transpose(__np.ascontiguousarray(a0).reshape(p0), p1))"
     ".reshape(p2)", ["t0", "(1, 2, 2)", "(0, 2, 1)", "(1, 4)"]),
    (E.contiguous(S0[2:E.NONE:-1]), ["a0", "p0", "p1"],
     "__np.ascontiguousarray(a0[p0:None:p1])", ["t0", "2", "-1"]),
])
def test_movement_kernel_parametrizes_numbers(expr, params, body, args):
    movement = op(expr)
    assert isinstance(movement, Movement)
    got_params, got_body, got_args = movement.kernel(names(2))
    assert (got_params, got_body, [str(a) for a in got_args]) == (params, body, args)
    assert all(isinstance(a, str) or isinstance(a.value, (int, tuple)) for a in got_args)


def test_movement_kernel_gives_one_parameter_per_variable():
    """Two slots holding one variable (Concat of x with itself) are one parameter."""
    params, body, args = op(E.numpy("concatenate", (S0, S1), axis=0)).kernel(["t3", "t3"])
    assert (params, body, args[:1]) == (["a0", "p0"], "__np.concatenate((a0, a0), axis=p0)",
                                        ["t3"])


@pytest.mark.parametrize("expr", [
    E.lib("pool", "maxpool", S0, (3, 3)),              # a library call
    E.lib("movement", "take_axis", S0, S1, 0.5),       # not one of MOVEMENT_KERNELS
    E.numpy("ones", (1, 4), E.dtype(np.float32)),      # not data movement
    E.numpy("concatenate", (S0, S1), axis=True),        # bools stay literal (branch pruning)
    E.contiguous(S0).reshape((2.0, 3)),
    E.numpy("transpose", S0, (1, 0), x=1),
    E.node(S0).transpose((1, 0)),                      # only .reshape among methods
    E.contiguous(S0).reshape((2, 3))[0].view(E.dtype(np.int8)),
    E.tuple_of(1, 2),                                  # no array at all
])
def test_movement_refuses_anything_else(expr):
    assert not isinstance(op(expr), Movement)


def test_text_is_refused():
    with pytest.raises(TypeError):
        E.lib("pool", "maxpool", "__os.system('x')")


def context():
    node = helper.make_node("Identity", ["x"], ["y"], name="n")
    return LoweringContext(Program([], [], [], []), node, 21, {"": 21})


def test_ctx_call_reads_the_values_of_the_expression():
    ctx = context()
    x, y = (Value((2, 3), np.dtype(np.float32), name=n) for n in "xy")
    out = ctx.call(E.numpy("concatenate", (E.contiguous(y), x), axis=0), shape=(4, 3),
                   dtype=np.float32)
    step = out.producer
    assert step.inputs == [y, x] and isinstance(step.op, Movement)
    assert step.op.render(["a", "b"]) == "__np.concatenate((__np.ascontiguousarray(a), b), axis=0)"
    # explicit inputs keep their order and absent (None) slots; the tree's Values map to them
    w = Value((3,), np.dtype(np.float32), name="w")
    out = ctx.call(E.lib("resize", "f", x, w, None), None, w, x, shape=(2, 3), dtype=np.float32)
    assert out.producer.inputs == [None, w, x]
    assert out.producer.op.render(["None", "tw", "tx"]) == "__k_resize.f(tx, tw, None)"
    with pytest.raises(TypeError, match="structured"):
        ctx.call("__k_pool.maxpool({0})", x, shape=(2, 3), dtype=np.float32)
    with pytest.raises(ValueError):
        ctx.call(E.reshape(x, (6,)), w, shape=(6,), dtype=np.float32)


def _is_text(node):
    """A str literal, an f-string, or an operator over one (`"..." % x`, `"a" + b`)."""
    if isinstance(node, ast.BinOp):
        return _is_text(node.left) or _is_text(node.right)
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                               and isinstance(node.value, str))


def _text_calls(tree):
    """ctx.call / ctx.call_multi / ctx.elementwise calls whose expression is source text."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "call_multi", "elementwise")
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "ctx"
                and node.args and _is_text(node.args[0])):
            yield node.lineno


def test_no_lowering_hands_over_source_text():
    found = [f"{path.name}:{line}" for path in LOWERINGS
             for line in _text_calls(ast.parse(path.read_text()))]
    assert found == []
    # ... and the scan would see one
    for text in ('ctx.call(f"{{0}}.reshape({s})", x, shape=s, dtype=d)',
                 'ctx.elementwise("({0} + {1})", a, b, dtype=d)',
                 'ctx.elementwise(f"__k_scalar.{f}({{0}})", a, dtype=d)',
                 'ctx.elementwise("(%s * {0})" % c, a, dtype=d)'):
        assert list(_text_calls(ast.parse(text))), text
    # a tree built with operators is no text
    assert not list(_text_calls(ast.parse('ctx.elementwise(S.np("exp", x) * k, a, dtype=d)')))


def test_steps_read_no_text():
    """steps.py and scalar_expr.py parse no source text: both read their trees."""
    for path in (PACKAGE / "steps.py", PACKAGE / "scalar_expr.py"):
        tree = ast.parse(path.read_text())
        parsing = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                   for n in ast.walk(f) if isinstance(n, ast.Attribute)
                   and n.attr in ("parse", "literal_eval", "get_source_segment", "format")}
        assert parsing == set(), path.name


# -- elementwise steps: scalar expression trees ---------------------------------------------------
X, Y, Z = S.operands(3)
F0 = S.scalar(0, np.float32)


@pytest.mark.parametrize("expr,text", [
    (S.paren(S.cond(S.not_(S.lt(X, F0)), X, F0)),
     "(t0 if not t0 < __np.float32(0.0) else __np.float32(0.0))"),
    (S.lib("scalar", "maximum", S.lib("scalar", "minimum", S.scalar(0.25, np.float32) * X + 0.5,
                                      1.0), F0),
     "__k_scalar.maximum(__k_scalar.minimum(__np.float32(0.25) * t0 + 0.5, 1.0), __np.float32(0.0))"),
    ((X + Y) * Z, "(t0 + t1) * t2"),
    (X - (Y - Z), "t0 - (t1 - t2)"),
    (X - Y - Z, "t0 - t1 - t2"),
    (X / (Y * Z), "t0 / (t1 * t2)"),
    (-X * Y / (Z * Z), "-t0 * t1 / (t2 * t2)"),
    (-(X + Y), "-(t0 + t1)"),
    (-(X ** Y), "-t0 ** t1"),
    ((-X) ** Y, "(-t0) ** t1"),
    (X ** (Y ** Z), "t0 ** t1 ** t2"),
    ((X ** Y) ** Z, "(t0 ** t1) ** t2"),
    (X ** -Y, "t0 ** -t1"),
    (S.lit(-0.5) ** X, "(-0.5) ** t0"),                # a negative number is no atom
    (S.lit(0.5) ** X, "0.5 ** t0"),
    ((X & Y) | (Z ^ X), "t0 & t1 | t2 ^ t0"),
    (X & (Y | Z), "t0 & (t1 | t2)"),
    (S.paren(~X), "(~t0)"),
    (S.lt(S.lt(X, Y), Z), "(t0 < t1) < t2"),          # never a chained comparison
    (S.or_(S.and_(X, Y), S.not_(Z)), "t0 and t1 or not t2"),
    (S.and_(S.or_(X, Y), Z), "(t0 or t1) and t2"),
    (S.not_(S.and_(X, Y)), "not (t0 and t1)"),
    (S.cond(X, S.cond(Y, X, Z), S.cond(Z, X, Y)), "(t0 if t1 else t2) if t0 else t0 if t2 else t1"),
    (S.cond(X, Y, S.paren(S.cond(Z, X, Y))), "t1 if t0 else (t0 if t2 else t1)"),
    (S.cond(X, Y, Z) * 2, "(t1 if t0 else t2) * 2"),
    (S.builtin("min", S.builtin("max", S.np("rint", X), -128.0), 127.0),
     "min(max(__np.rint(t0), -128.0), 127.0)"),
    ((X * S.scalar(4, np.float32)) ** S.scalar(0.5, np.float32),
     "(t0 * __np.float32(4.0)) ** __np.float32(0.5)"),
    (S.convert(np.int64, X), "__np.int64(t0)"),
    (S.lit(False), "False"),
    (Y, "t1"),
])
def test_scalar_rendering(expr, text):
    assert S.render(expr, ["t0", "t1", "t2"]) == text


def _evaluate(e, env):
    """The value of a scalar tree of operators over numbers, computed from the tree itself."""
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
           "**": operator.pow, "<": operator.lt, ">": operator.gt, "==": operator.eq,
           "&": operator.and_, "|": operator.or_, "^": operator.xor}
    if isinstance(e, S.Operand):
        return env[e.index]
    if isinstance(e, S.Const):
        return e.leaf.value
    if isinstance(e, S.Paren):
        return _evaluate(e.inner, env)
    if isinstance(e, S.Unary):
        v = _evaluate(e.operand, env)
        return {"-": operator.neg, "~": operator.invert, "not": operator.not_}[e.op](v)
    if isinstance(e, S.Cond):
        return _evaluate(e.then if _evaluate(e.test, env) else e.orelse, env)
    left, right = _evaluate(e.left, env), _evaluate(e.right, env)
    if e.op in ("and", "or"):
        return (left and right) if e.op == "and" else (left or right)
    return ops[e.op](left, right)


@pytest.mark.parametrize("expr", [
    (X - Y) - (Z - X) * (Y + Z), X - (Y - (Z - X)), -(X - Y) ** 2, (-X) ** 2 - -Y ** 2,
    S.lit(-2) ** Y, 2 ** -(Y - X), X ** Y ** S.lit(2), (X ** Y) ** 2,
    S.cond(S.gt(X, Y), X - Y, S.cond(S.lt(X, Z), Z, X) * 3),
    S.cond(S.cond(S.lt(X, Y), S.gt(X, Z), S.lt(Y, Z)), -X, ~Y) + 1,
    S.or_(S.and_(S.lt(X, Y), S.gt(Y, Z)), S.not_(S.lt(X, Z))),
    S.and_(S.or_(S.lt(X, Y), S.gt(Y, Z)), S.not_(S.or_(S.lt(X, Z), S.gt(Z, Y)))),
    S.lt(S.gt(X, Y), S.lt(Y, Z)), (X & Y) ^ (Z | X) & ~Y, X & (Y ^ Z) | Z,
    X * (Y / (Z + 7)) - X / Y / (Z + 7) + X / (Y / (Z + 7)),
])
@pytest.mark.parametrize("env", [(3, 5, -2), (-4, 2, 6), (1, 1, 1)])
def test_scalar_rendering_keeps_the_tree_s_meaning(expr, env):
    """Python reads the rendered source as the tree says (precedence and associativity)."""
    text = S.render(expr, [f"({v})" for v in env])
    assert eval(text, {}, {}) == _evaluate(expr, env), text    # noqa: S307 (numbers only)


def test_scalar_modules_come_from_the_tree():
    q = S.lib("narrow", "low_bits", S.convert(np.int64, S.lib(
        "quantize", "saturate", X / Y, 0, -8.0, 7.0)), 15)
    assert S.render(q, ["x", "s"]) == \
        "__k_narrow.low_bits(__np.int64(__k_quantize.saturate(x / s, 0, -8.0, 7.0)), 15)"
    assert S.modules(q) == {"narrow", "quantize"}
    assert S.modules(S.math("erf", X) + S.np("exp", X) + S.builtin("abs", X)) == set()
    assert S.modules(S.paren(S.cond(X, S.lib("scalar", "erf_f32", Y), -Z))) == {"scalar"}
    assert S.operand_count(S.paren(X * Z)) == 3 and S.operand_count(S.lit(1)) == 0


@pytest.mark.parametrize("build,error", [
    (lambda: S.node("{0}"), TypeError),                       # text
    (lambda: S.lib("scalar", "maximum", X, "__os.system('x')"), TypeError),
    (lambda: X + "1", TypeError),
    (lambda: S.lit(np.zeros(2)), TypeError),                   # not a number
    (lambda: S.node(Value((2,), np.dtype(np.float32))), TypeError),   # a Value: use an operand
    (lambda: S.builtin("eval", X), ValueError),
    (lambda: S.lib("scalar", "f(x); g", X), ValueError),      # not an identifier
    (lambda: S.lib("a.b", "f", X), ValueError),
    (lambda: X == Y, TypeError),                               # comparisons are S.eq ...
    (lambda: S.cond(X, Y, Z) if X else None, TypeError),       # ... and have no truth value
    (lambda: X < Y, TypeError),
])
def test_scalar_trees_refuse_text_and_mistakes(build, error):
    with pytest.raises(error):
        build()


def test_ctx_elementwise_takes_a_tree():
    ctx = context()
    x, y = (Value((2, 3), np.dtype(np.float32), name=n) for n in "xy")
    out = ctx.elementwise(S.paren(S.lib("scalar", "erf_f32", X) * Y), x, y, dtype=np.float32)
    step = out.producer
    assert step.kind == "ew" and step.inputs == [x, y] and step.modules == {"scalar"}
    assert S.render(step.expr, ["a", "b"]) == "(__k_scalar.erf_f32(a) * b)"
    with pytest.raises(TypeError, match="structured"):
        ctx.elementwise("({0} + {1})", x, y, dtype=np.float32)
    with pytest.raises(ValueError, match="operand 2"):
        ctx.elementwise(X + Z, x, y, dtype=np.float32)


def test_fused_kernel_renders_the_trees():
    """Each step of a fused group is one line rendered from its tree, over the loop's elements
    and the variables of earlier steps."""
    ctx = context()
    x, y = (Value((2, 3), np.dtype(np.float32), name=n) for n in "xy")
    s = ctx.elementwise(S.paren(X + Y), x, y, dtype=np.float32)
    out = ctx.elementwise(S.lib("scalar", "maximum", X, S.scalar(0, np.float32)), s,
                          dtype=np.float64)
    ctx.program.inputs, ctx.program.outputs = [x, y], [out]
    (kernel,) = plan.plan(ctx.program)
    text = fused.function_text(kernel, "f")
    assert "v0 = __np.float32((a0_[i0] + a1_[i0]))" in text
    assert "v1 = __np.float64(__k_scalar.maximum(v0, __np.float32(0.0)))" in text
    imports = [line for line in fused.fused_kernel(kernel, "0" * 16).file_text.splitlines()
               if line.startswith("from onnxjit.kernels import")]
    assert imports == ["from onnxjit.kernels import scalar as __k_scalar",
                       "from onnxjit.kernels import views as __k_views"]
    assert "a0_ = __k_views.c_view(a0, (n0,))" in text
