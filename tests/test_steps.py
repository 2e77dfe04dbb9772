"""Steps are data: lowerings build expression trees (onnxjit/steps.py), classified, rendered and
parametrized from the tree; no lowering hands over source text for an array step."""
import ast
from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from onnxjit import steps as E
from onnxjit.ir import Value
from onnxjit.specialize import LoweringContext, Program
from onnxjit.steps import ArrayExpr, LibraryCall, Movement, Param

OPS = Path(__file__).resolve().parent.parent / "onnxjit" / "ops"
STEPS = Path(__file__).resolve().parent.parent / "onnxjit" / "steps.py"


def op(expr):
    """The op of `expr` over explicit slots (E.slot)."""
    return E.op_of(expr)


def names(n):
    return [f"t{i}" for i in range(n)]


S0, S1 = E.slot(0), E.slot(1)


@pytest.mark.parametrize("expr,kind,text,modules,calls", [
    (E.lib("pool", "maxpool", S0, (3, 3), 1.5, None), LibraryCall,
     "__k_pool.maxpool(t0, (3, 3), 1.5, None)", {"pool"}, 1),
    (E.lib("reduce", "cumulative", S0, S1, True, False), ArrayExpr,          # bools stay literal
     "__k_reduce.cumulative(t0, t1, True, False)", {"reduce"}, 1),
    (E.lib("resize", "nearest", S0, E.scalar(0.5, np.float32)), ArrayExpr,    # source argument
     "__k_resize.nearest(t0, __np.float32(0.5))", {"resize"}, 1),
    (E.lib("tensor_misc", "det", E.contiguous(S0).reshape((6, 4))).reshape((2, 3)), ArrayExpr,
     "__k_tensor_misc.det(__np.ascontiguousarray(t0).reshape((6, 4))).reshape((2, 3))",
     {"tensor_misc"}, 1),
    (E.lib("normalization", "reshape3", E.lib("normalization", "layer_norm", S0)[0], (2,)),
     ArrayExpr, "__k_normalization.reshape3(__k_normalization.layer_norm(t0)[0], (2,))",
     {"normalization"}, 2),
    (E.numpy("full", (2, 3), E.scalar(1.5, np.float32)), ArrayExpr,
     "__np.full((2, 3), __np.float32(1.5))", set(), 0),
    (E.numpy("concatenate", (S0, S1), axis=1), Movement,
     "__np.concatenate((t0, t1), axis=1)", set(), 0),
    (E.lib("movement", "concat", E.tuple_of(E.contiguous(S0), S1, trailing_comma=True), 2,
           (2, 6)), Movement,
     "__k_movement.concat((__np.ascontiguousarray(t0), t1,), 2, (2, 6))", {"movement"}, 1),
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


def test_library_call_arguments():
    call = op(E.lib("pool", "maxpool", S1, (3, 3), S0, -2))
    assert call.kernel == ("pool", "maxpool")
    assert call.args == [1, Param((3, 3)), 0, Param(-2)] and call.driver_callable
    nan = op(E.lib("pool", "maxpool", S0, float("nan")))     # compiled code holds a NaN
    assert isinstance(nan, ArrayExpr) and nan.render(["t0"]) == "__k_pool.maxpool(t0, __np.nan)"


@pytest.mark.parametrize("expr,params,body,args", [
    (E.numpy("concatenate", (S0, S1), axis=1), ["a0", "a1", "p0"],
     "__np.concatenate((a0, a1), axis=p0)", ["t0", "t1", "1"]),
    (E.lib("movement", "concat", E.tuple_of(E.contiguous(S0), E.contiguous(S1),
                                            trailing_comma=True), 1, (1, 5, 7)),
     ["a0", "a1", "p0", "p1"],
     "__k_movement.concat((__np.ascontiguousarray(a0), __np.ascontiguousarray(a1)), p0, p1)",
     ["t0", "t1", "1", "(1, 5, 7)"]),
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


def _text_calls(tree):
    """ctx.call / ctx.call_multi calls whose expression is source text."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("call", "call_multi") and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "ctx" and node.args):
            first = node.args[0]
            if (isinstance(first, (ast.JoinedStr, ast.BinOp)) or isinstance(first, ast.Constant)
                    and isinstance(first.value, str)):
                yield node.lineno


def test_no_lowering_hands_over_source_text():
    found = [f"{path.name}:{line}" for path in sorted(OPS.glob("*.py"))
             for line in _text_calls(ast.parse(path.read_text()))]
    assert found == []
    # ... and the scan would see one
    assert list(_text_calls(ast.parse('ctx.call(f"{{0}}.reshape({s})", x, shape=s, dtype=d)')))


def test_steps_read_no_text_for_array_steps():
    """steps.py parses text only in fragment_modules (elementwise scalar fragments)."""
    tree = ast.parse(STEPS.read_text())
    parsing = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
               for n in ast.walk(f) if isinstance(n, ast.Attribute)
               and n.attr in ("parse", "literal_eval", "get_source_segment")}
    assert parsing == {"fragment_modules"}
