"""DESIGN.md Safety: nothing a model contains reaches generated source or is executed."""
import os

import numpy as np
from onnx import TensorProto, helper

import onnxjit.backend as backend

HOSTILE = [
    "x'); __import__('os').system('touch {marker}'); ('",
    'y"""\n__import__("os").system("touch {marker}")\n"""',
    "z\n\rimport os; os.system('touch {marker}')  # ",
    "__import__('os').system('touch {marker}')",
    "\u2028def f(): pass",
    "class", "None", "__np", "",
]


def _hostile_model(marker):
    names = [h.format(marker=marker) for h in HOSTILE]
    inp, mid, out = names[0], names[1], names[3]
    x = helper.make_tensor_value_info(inp, TensorProto.FLOAT, [3])
    nodes = [helper.make_node("Add", [inp, inp], [mid], name=names[2], doc_string=names[1]),
             helper.make_node("Relu", [mid], [names[5]], name=names[4]),
             helper.make_node("Neg", [names[5]], [names[6]], name=names[7]),
             helper.make_node("Abs", [names[6]], [out], name=names[8])]
    graph = helper.make_graph(nodes, names[1], [x], [helper.make_empty_tensor_value_info(out)])
    graph.doc_string = names[0]
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), inp, out


def test_hostile_names_compile_run_and_execute_nothing(tmp_path):
    marker = tmp_path / "pwned"
    model, inp, out = _hostile_model(marker)
    rep = backend.prepare(model)
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    result = rep.run({inp: x})
    np.testing.assert_array_equal(result[out], np.abs(-np.maximum(2 * x, 0)))
    assert not os.path.exists(marker)
    source = rep.source()
    compile(source, "generated", "exec")   # still one valid module
    for line in source.splitlines():
        code = line.split("#", 1)[0]
        assert "__import__(" not in code and "system(" not in code and "import os" not in code
