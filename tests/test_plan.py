"""The plan's schedule as data (plan.schedule): njit entry or Python driver, which kernels the
driver calls and which an njit segment holds, what each call reads and makes, and liveness. Emit
renders it as it is (the rendered driver runs and matches the reference)."""
import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit.backend as backend
from helpers import concat_split_model
from onnxjit.emit import Emitter
from onnxjit.pipeline import generate
from onnxjit.plan import MAX_SEGMENT_STATEMENTS, schedule, statement_lines


def make_model(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(
        nodes, "plan", [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def two_chains(n=30):
    """Relu chains over x (4, 8) and y (3, 5), taking turns: each step a fused kernel of its own
    (the shape changes every step), 2n of them: too long for one njit entry, and no library call
    or data movement to cut it, so the driver calls njit segments."""
    nodes = []
    for i in range(n):
        nodes += [helper.make_node("Relu", [f"a{i - 1}" if i else "x"], [f"a{i}"]),
                  helper.make_node("Relu", [f"b{i - 1}" if i else "y"], [f"b{i}"])]
    return make_model(nodes, [("x", (4, 8)), ("y", (3, 5))], [f"a{n - 1}", f"b{n - 1}"])


def generated(model, entry="auto", profile=False):
    signature = [(i.name, tuple(d.dim_value for d in i.type.tensor_type.shape.dim), np.dtype(np.float32))
                 for i in model.graph.input]
    program, kernels, module, _ = generate(model, signature, profile=profile, entry=entry)
    return program, kernels, module


def check_liveness(program, sched):
    """Every call reads only what the entry's parameters or earlier calls hold; each intermediate
    is deleted once, after its last reader; graph outputs, inputs and weights never."""
    params = {id(v) for v in program.inputs}
    outputs = {id(v) for v in program.outputs}
    held, dead = set(), set()
    for i, call in enumerate(sched.calls):
        for v in call.reads:
            assert v.is_const or id(v) in params or id(v) in held, (i, call.kind)
            assert id(v) not in dead, (i, call.kind)
        held.update(id(v) for v in call.makes)
        for v in call.dead:
            assert id(v) not in dead and id(v) not in outputs and not v.is_const
            assert not any(v is r for later in sched.calls[i + 1:] for r in later.reads)
            dead.add(id(v))
    made = {id(v) for c in sched.calls for v in c.makes}
    assert outputs - params <= made
    assert made - outputs - {id(v) for v in program.inputs} == dead   # nothing held to the end


def test_short_graph_is_one_njit_entry():
    program, kernels, module = generated(two_chains(n=3))
    sched = module.schedule
    assert sched.entry == "njit" and [c.kind for c in sched.calls] == ["entry"]
    assert sched.calls[0].kernels == kernels and len(kernels) == 6
    assert sched.hosts() == {k.name: ("run_graph", True) for k in kernels}
    assert "def run_graph(" in module.source and "segment_" not in module.source


def test_long_graph_of_fused_kernels_runs_in_segments():
    model = two_chains(n=30)
    program, kernels, module = generated(model)
    sched = module.schedule
    assert sched.entry == "driver" and [c.kind for c in sched.calls] == ["segment", "segment"]
    first, second = sched.calls
    # segments of at most MAX_SEGMENT_STATEMENTS lines, one fused kernel (one line) each
    assert first.kernels == kernels[:MAX_SEGMENT_STATEMENTS]
    assert second.kernels == kernels[MAX_SEGMENT_STATEMENTS:]
    assert (first.name, second.name) == ("segment_0", "segment_1")
    assert sched.hosts()[kernels[-1].name] == ("segment_1", True)
    # the first segment returns only the heads of both chains, which the second reads
    heads = [k.outputs[0] for k in kernels[MAX_SEGMENT_STATEMENTS - 2:MAX_SEGMENT_STATEMENTS]]
    assert first.makes == heads and first.reads == list(program.inputs)
    assert second.reads == heads and second.makes == list(program.outputs)
    assert first.dead == [] and second.dead == heads
    check_liveness(program, sched)
    driver = module.source[module.source.index("def run_graph("):]
    assert driver.count("= segment_") == 2 and "\n    del " in driver

    rep = backend.prepare(model)
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((4, 8)).astype(np.float32),
             "y": rng.standard_normal((3, 5)).astype(np.float32)}
    for got, want in zip(rep.run(feeds), ReferenceEvaluator(model).run(None, feeds)):
        np.testing.assert_array_equal(got, want)


def test_driver_calls_library_kernels_and_movement_itself():
    program, kernels, module = generated(concat_split_model(blocks=12))
    sched = module.schedule
    assert sched.entry == "driver" and not any(c.jitted for c in sched.calls)
    # the views of the pools' canonical 5-D operands aside (plan.Kernel.plumbing)
    kinds = {c.kernels[0].nodes[0][1]: c.kind for c in sched.calls if not c.kernels[0].plumbing}
    assert kinds == {"MaxPool": "library", "Concat": "movement", "Split": "movement",
                     "Add": "fused", "Flatten": "view"}
    assert all(len(c.kernels) == 1 for c in sched.calls) and sched.lazy_calls == 0
    assert [c.links for c in sched.calls] == [c.kind == "library" for c in sched.calls]
    check_liveness(program, sched)
    # each driver call deletes what it read for the last time: the MaxPool's 5-D output after
    # the view back, that view after the Concat that reads it too, the Concat's output after
    # the Split
    view5, pool, back, concat, split = sched.calls[:5]
    assert view5.kernels[0].plumbing and back.kernels[0].plumbing
    # views run as numpy in the driver (steps.Movement.reshape_only), library calls with
    # plain ints: neither builds np.int64 objects for the dispatcher to type
    assert (view5.kind, pool.kind, back.kind, concat.kind, split.kind) == (
        "view", "library", "view", "movement", "movement")
    driver = module.source[module.source.index("def run_graph("):]
    assert "__np.int64(" not in driver and "maxpool" in driver
    assert back.dead == pool.makes == back.reads
    assert concat.dead == back.makes == concat.reads[:1]
    assert split.dead == concat.makes


@pytest.mark.parametrize("entry,expected", [("auto", "njit"), ("driver", "driver")])
def test_entry_option(entry, expected):
    """A short graph calling a library kernel keeps its njit entry unless asked for the driver."""
    program, kernels, module = generated(concat_split_model(blocks=1), entry=entry)
    assert module.schedule.entry == expected
    assert schedule(program, kernels, entry).entry == expected


def test_profile_makes_each_kernel_a_call():
    program, kernels, module = generated(two_chains(n=3), profile=True)
    sched = module.schedule
    assert sched.entry == "driver" and sched.profile
    assert [c.kernels for c in sched.calls] == [[k] for k in kernels]
    assert all(c.kind == "segment" for c in sched.calls)      # fused, each timed in its segment
    check_liveness(program, sched)
    assert module.source.count("__t = __record(") == len(kernels)


def test_plan_counts_the_lines_emit_writes():
    """plan.statement_lines, the cost segments are cut by, is what emit writes for each kernel."""
    for model in (concat_split_model(blocks=2), two_chains(n=2)):
        program, kernels, module = generated(model)
        emitter = Emitter(program, module.schedule)
        assert {k.kind for k in kernels} <= {"fused", "call"}
        for k in kernels:
            assert len(emitter.statement(k).lines) == statement_lines(k)
