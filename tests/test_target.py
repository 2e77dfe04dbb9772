"""The target description (onnxjit/target.py) and the machine code it leads to.

CI runs this file twice: as is (this VM: AVX-512) and with NUMBA_CPU_NAME=haswell (the AVX2
path most laptops take). Each run checks that the target onnxjit reads is the one Numba
generates code for, and that a compiled graph's loops use that target's registers and no wider.
"""
import re

import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxjit
from onnxjit import scalar_expr, target
from onnxjit.kernels import simd



def _source(step):
    """The source a step renders to (its inputs named a0, a1, ...)."""
    names = [f"a{i}" for i in range(len(step.inputs))]
    if step.op is None:     # an elementwise step: a scalar expression tree
        return scalar_expr.render(step.expr, names)
    return step.op.render(names)

def test_host_target_follows_what_numba_compiles_for():
    """onnxjit's target is the ISA of the features Numba hands LLVM (NUMBA_CPU_FEATURES, '' for
    NUMBA_CPU_NAME=generic, else the host's)."""
    from numba.core import config
    from numba.core.codegen import JITCPUCodegen
    features = JITCPUCodegen._get_host_cpu_features(None)
    t = target.host()
    if "+avx512f" in features.split(","):
        assert (t.isa, t.vector_bits, t.f32_lanes) == ("avx512", 512, 16)
    elif "+avx2" in features.split(","):
        assert (t.isa, t.vector_bits, t.f32_lanes) == ("avx2", 256, 8)
    else:
        assert (t.isa, t.vector_bits) == ("generic", 128)
    assert t.avx512 == simd.has_avx512()
    if (config.CPU_NAME or "").lower() == "generic":
        assert t.isa == "generic"


def _elementwise_model(n):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])
    nodes = [helper.make_node("Mul", ["x", "x"], ["t"]), helper.make_node("Add", ["t", "x"], ["y"])]
    return helper.make_model(helper.make_graph(nodes, "fma_chain", [x], [y]),
                             opset_imports=[helper.make_opsetid("", 17)])


def test_compiled_loops_use_the_target_registers_and_no_wider():
    """The fused Mul+Add loop vectorizes to the target's width: zmm on AVX-512, ymm (never zmm)
    on AVX2, xmm only on the generic target."""
    from numba.core.registry import CPUDispatcher
    model = _elementwise_model(4096)
    x = np.linspace(-3, 3, 4096, dtype=np.float32)
    rep = onnxjit.prepare(model)
    np.testing.assert_allclose(rep.run([x])[0], ReferenceEvaluator(model).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)   # contract: one FMA
    compiled = next(iter(rep._cache.values()))
    functions = [f for f in vars(compiled.module).values()
                 if isinstance(f, CPUDispatcher) and f.signatures]
    # Compiled afresh: a function loaded from Numba's disk cache has no assembly to show.
    import numba
    asm = ""
    for f in functions:
        fresh = numba.njit(**{k: v for k, v in f.targetoptions.items() if k not in ("cache", "nopython")})(f.py_func)
        for sig in f.signatures:
            fresh.compile(sig)
            asm += fresh.inspect_asm(sig)
    assert asm, "no compiled function of the graph found"
    isa = target.host().isa
    vector = re.findall(r"\bv?(?:fmadd\w*|mulps|addps)\s+%([xyz])mm", asm)
    assert vector, "the fused loop did not vectorize"
    widest = max(vector, key="xyz".index)
    assert widest == {"avx512": "z", "avx2": "y", "generic": "x"}[isa], (isa, sorted(set(vector)))


def test_lowerings_choose_kernels_from_the_target_they_are_handed():
    """Kernel choice reads the program's target description (ctx.target), not the machine: the
    same Conv/MatMul/Softmax lowered for AVX-512 and for AVX2 in one process takes the explicit
    512-bit conv kernel only for AVX-512, packed-weight GEMMs (each its own) and the 16-lane row
    kernels for both."""
    import onnx
    from onnx import helper

    from onnxjit.ir import Value
    from onnxjit.specialize import specialize
    from onnxjit.target import Target
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((16, 3, 3, 3)).astype(np.float32), "w")
    b = onnx.numpy_helper.from_array(rng.standard_normal((27, 64)).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "b"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=-1)]
    shape = onnx.numpy_helper.from_array(np.array([-1, 27], np.int64), "shape")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [1, 3, 18, 18])],
                              [helper.make_tensor_value_info("y", 1, None)],
                              initializer=[w, b, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    def lowered(target):
        program = specialize(model, [Value((1, 3, 18, 18), np.dtype(np.float32), name="x")],
                             target=target)
        assert program.target is target
        by_kind = {s.meta.get("kind"): s for s in program.steps}
        return (by_kind["conv"].meta["plan"], by_kind["matmul"].meta["packed"],
                any("softmax_f32" in _source(s) for s in program.steps))

    conv, packed, softmax = lowered(Target("avx512", 512))
    assert conv[0] == "s2" and packed is not None and softmax
    conv, packed, softmax = lowered(Target("avx2", 256))
    # AVX2's own GEMM (gemm_avx2) for the conv too: no BLAS on the AVX2 CNN path
    assert conv == ("avx2", (16, (3, 3))) and packed is not None and softmax
    conv, packed, softmax = lowered(Target("generic", 128))
    assert conv is None and packed is None and not softmax


def test_winograd_point_gemms_follow_the_target():
    """A 3x3 stride-1 Conv picks Winograd on every target; its point GEMMs run onnxjit's
    register-blocked kernels (threaded per point) on AVX-512, the AVX2 GEMM (threaded per point)
    on AVX2, BLAS from one thread elsewhere, as the call the lowering records says."""
    import onnx
    from onnx import helper

    from onnxjit.ir import Value
    from onnxjit.kernels.winograd import GEMM_AVX2, GEMM_BLAS, GEMM_CK
    from onnxjit.specialize import specialize
    from onnxjit.target import Target
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    w = onnx.numpy_helper.from_array(
        np.random.default_rng(2).standard_normal((32, 16, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
                              "g", [helper.make_tensor_value_info("x", 1, [1, 16, 28, 28])],
                              [helper.make_tensor_value_info("y", 1, None)], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for t, gemm in ((Target("avx512", 512), GEMM_CK), (Target("avx2", 256), GEMM_AVX2),
                    (Target("generic", 128), GEMM_BLAS)):
        program = specialize(model, [Value((1, 16, 28, 28), np.dtype(np.float32), name="x")],
                             target=t)
        conv = next(s for s in program.steps if s.meta.get("kind") == "conv")
        assert conv.meta["plan"][0] == "winograd" and conv.meta["wgemm"] == gemm
        call = conv.op
        # the entry of the point GEMMs (conv3x3_blas / _avx2 compile without ck*)
        entry = {GEMM_CK: "conv3x3", GEMM_AVX2: "conv3x3_avx2", GEMM_BLAS: "conv3x3_blas"}
        assert call.kernel == ("winograd", entry[gemm])
        assert call.args[call.names.index("gemm")].value == gemm


def test_int8_gemm_follows_the_target():
    """MatMulInteger by constant int8 weights: the AVX512-VNNI kernel only where the target has
    VNNI, the AVX2 vpmaddubsw kernel on AVX2 (and AVX-512 without VNNI), float64 BLAS on the
    generic target; the host's choice runs exact against the reference."""
    import onnx
    from onnx import TensorProto, helper

    from onnxjit.ir import Value
    from onnxjit.specialize import specialize
    from onnxjit.target import Target
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    rng = np.random.default_rng(1)
    w = np.clip(np.round(rng.standard_normal((70, 40)) * 40), -127, 127).astype(np.int8)
    inits = [onnx.numpy_helper.from_array(w, "w"),
             onnx.numpy_helper.from_array(np.array(0, np.int8), "wz")]
    node = helper.make_node("MatMulInteger", ["a", "w", "az", "wz"], ["y"])
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [9, 70]),
                               helper.make_tensor_value_info("az", TensorProto.UINT8, [])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])

    def kernel(t):
        program = specialize(model, [Value((9, 70), np.dtype(np.uint8), name="a"),
                                     Value((), np.dtype(np.uint8), name="az")], target=t)
        ops = " ".join(_source(s) for s in program.steps)
        return "vnni" if "qgemm_u8s8(" in ops else "madd" if "qgemm_u8s8_madd(" in ops else None

    assert kernel(Target("avx512", 512, vnni=True)) == "vnni"
    assert kernel(Target("avx512", 512)) == kernel(Target("avx2", 256)) == "madd"
    assert kernel(Target("generic", 128)) is None
    assert kernel(target.host()) == target.host().int8_dot
    feeds = {"a": rng.integers(0, 256, (9, 70)).astype(np.uint8), "az": np.array(131, np.uint8)}
    got = onnxjit.prepare(model).run(feeds)[0]
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, feeds)[0])


# Library kernels that call BLAS (np.dot or Numba's xxgemm): OpenBLAS's worker threads spin
# after each call and held the cores Numba's threads needed (docs/design.md, "Threads")
BLAS_KERNELS = {("conv", "conv"), ("conv_epilogue", "conv_act"), ("conv", "conv_transpose"),
                ("matmul", "matmul3"), ("matmul", "matmul3_epilogue"), ("matmul", "gemm"),
                ("winograd", "conv3x3_blas"), ("conv_epilogue", "winograd_blas_act"),
                ("attention", "attention")}


def test_float32_models_call_no_blas_on_the_simd_targets():
    """The built-in suite's float32 CNNs, detectors and transformers lowered for AVX-512 and for
    AVX2 call no library kernel that goes through BLAS (the generic target still does: it has
    no GEMM of its own)."""
    from onnxjit.inputs import model_inputs
    from onnxjit.ir import Value
    from onnxjit.specialize import specialize
    from onnxjit.steps import ArrayExpr, Call, LibraryCall, walk
    from onnxjit.tools.models import builtin_suite
    import onnxjit.ops  # noqa: F401  (registers the lowerings)
    models = builtin_suite(only=r"^(mlp|transformer_block|small_cnn|mobilenet|yolo_csp|"
                                r"seg_decoder|light_resnet50|light_squeezenet)$")
    assert len(models) == 8

    def kernels(model, t):
        values = [Value(a.shape, a.dtype, name=n) for n, a in model_inputs(model).items()]
        found = set()
        for step in specialize(model, values, target=t).steps:
            if isinstance(step.op, LibraryCall):
                found.add(step.op.kernel)
            elif isinstance(step.op, ArrayExpr):     # a MatMul's kernel call inside reshapes
                found |= {(n.library_module, n.function) for n in walk(step.op.expr)
                          if isinstance(n, Call) and n.library_module}
        return found
    for name, model in models:
        for t in (target.Target("avx512", 512), target.Target("avx2", 256)):
            assert not kernels(model, t) & BLAS_KERNELS, (name, t.isa)
    generic = target.Target("generic", 128)
    assert kernels(dict(models)["small_cnn"], generic) & BLAS_KERNELS
    assert ("matmul", "matmul3") in kernels(dict(models)["transformer_block"], generic)
