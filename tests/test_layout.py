"""The package layout: the library never imports the tooling (onnxjit/tools/ and the shims at the
old paths), and no module takes part in an import circle.

Static checks read every module's imports with `ast`; the run-time checks import modules in fresh
interpreters. Module names come from the files under onnxjit/, so a new module is checked too.
"""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "onnxjit"
REPO = PACKAGE.parent

# Tooling: the tools package, the shims left at the old paths, and the fuzzer.
TOOLING_SHIMS = {"onnxjit.__main__", "onnxjit.bench", "onnxjit.conformance", "onnxjit.models",
                 "onnxjit.cuda.bench", "onnxjit.fuzz"}

# Module-level circles that exist today, each with why; the list only shrinks (a test below fails
# when one of them is gone, so that it is struck off).
KNOWN_CIRCLES = {
    # host_ops imports ops.strings at its end so that the string host ops register with it;
    # ops.strings imports host_ops' `host` decorator.
    frozenset({"onnxjit.host_ops", "onnxjit.ops.strings"}),
}


def is_tooling(name):
    return name in TOOLING_SHIMS or name == "onnxjit.tools" or name.startswith("onnxjit.tools.")


def module_files():
    """{module name: path} of every module of the onnxjit package."""
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


MODULES = module_files()


def _resolve(module, node, is_package):
    """The absolute module an `ast.ImportFrom` names, and the names it imports."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module
    return source, [f"{source}.{a.name}" for a in node.names]


def _targets(module, node, is_package):
    """The onnxjit modules an import statement loads (a parent package is loaded already)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        source, children = _resolve(module, node, is_package)
        names = [source] + children
    return {n for n in names if n in MODULES and n != module and not module.startswith(n + ".")}


def _is_main_guard(node):
    """`if __name__ == "__main__":`"""
    test = getattr(node, "test", None)
    return (isinstance(node, ast.If) and isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def imports(module, toplevel_only=False):
    """[(imported module, line)] of `module`. toplevel_only: the statements that run when the module
    is imported (its body, including under module-level if/try), not those in functions or under
    `if __name__ == "__main__"`. Otherwise every import, except under that guard and inside a
    module-level `__getattr__` (a lazy re-export of an old name: it runs only when the name is asked
    for)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if _is_main_guard(child):
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node is tree and child.name == "__getattr__":
                    continue
                if toplevel_only:
                    continue
            if isinstance(child, ast.ClassDef) and toplevel_only:
                visit(child)     # a class body runs at import
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.extend((t, child.lineno) for t in _targets(module, child, path.name == "__init__.py"))
            visit(child)
    visit(tree)
    return found


def test_module_list_sees_the_package():
    """The checks below read the modules they should (the walk found the library and the tools)."""
    for name in ("onnxjit", "onnxjit.backend", "onnxjit.explain", "onnxjit.inputs", "onnxjit.ops",
                 "onnxjit.kernels", "onnxjit.tools.cli", "onnxjit.tools.bench", "onnxjit.bench"):
        assert name in MODULES, name
    assert any(t == "onnxjit.explain" for t, _ in imports("onnxjit.backend"))   # lazy: rep.explain()
    assert not any(t == "onnxjit.explain" for t, _ in imports("onnxjit.backend", toplevel_only=True))
    assert any(t == "onnxjit.tools.bench" for t, _ in imports("onnxjit.tools.cli"))


def test_library_never_imports_tooling():
    """No library module imports the tooling, not even inside a function."""
    bad = [f"{MODULES[m].relative_to(REPO)}:{line} imports {t}"
           for m in sorted(MODULES) if not is_tooling(m)
           for t, line in imports(m) if is_tooling(t)]
    assert not bad, "\n".join(bad)


def _circles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for v in sorted(graph):
            if v not in index:
                connect(v)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_circle_finder_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset("abc")]
    assert _circles({"a": {"b"}, "b": set()}) == []


def test_no_module_level_import_circle():
    """No circle among the imports that run when modules load (the known ones aside)."""
    graph = {m: {t for t, _ in imports(m, toplevel_only=True)} for m in MODULES}
    found = set(_circles(graph))
    assert not found - KNOWN_CIRCLES, sorted(sorted(c) for c in found - KNOWN_CIRCLES)
    assert not KNOWN_CIRCLES - found, ("no longer a circle: strike it off KNOWN_CIRCLES",
                                       sorted(sorted(c) for c in KNOWN_CIRCLES - found))


def test_tooling_is_in_no_circle():
    """Counting every import (in functions too), no circle passes through the tooling: the
    circle backend -> explain -> __main__/bench -> backend is gone."""
    graph = {m: {t for t, _ in imports(m)} for m in MODULES}
    bad = [sorted(c) for c in _circles(graph) if any(is_tooling(m) for m in c)]
    assert not bad, bad


# Imports each module in a fresh interpreter: a circle that breaks in one import order raises
# ImportError there. Forked from a parent that has loaded the third-party packages only (numpy,
# numba, onnx, scipy), so each child starts without any onnxjit module and costs milliseconds.
_ISOLATED = r"""
import importlib, json, os, sys, traceback
import numpy, numba, onnx, onnx.reference, scipy.linalg  # noqa: F401
names = json.loads(sys.argv[1])
failed = {}
for name in names:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        status, text = 0, b""
        try:
            importlib.import_module(name)
            leaked = sorted(m for m in sys.modules if m == "onnxjit" or m.startswith("onnxjit."))
            if name not in leaked:
                status, text = 1, b"not in sys.modules after its import"
        except BaseException:
            status, text = 1, traceback.format_exc().encode()
        os.write(write, text)
        os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        text = f.read()
    _, code = os.waitpid(pid, 0)
    if code:
        failed[name] = text.decode(errors="replace")[-2000:] or f"exit status {code}"
print(json.dumps(failed))
"""


def _import_each(names, env=None):
    out = subprocess.run([sys.executable, "-c", _ISOLATED, json.dumps(names)], capture_output=True,
                         text=True, timeout=600, cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks one child per module")
def test_each_module_imports_alone():
    """`import onnxjit.X` works as the first onnxjit import of a process, for every module X."""
    names = sorted(MODULES)
    env = dict(os.environ)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    failed = _import_each(names, env)
    assert not failed, "\n\n".join(f"{n}:\n{t}" for n, t in failed.items())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks one child per module")
def test_isolated_import_detects_a_circle(tmp_path):
    """The isolated import fails on a circle that breaks (a imports b, b imports a name of a)."""
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import g\ndef f():\n    return g\n")
    (pkg / "b.py").write_text("from .a import f\ndef g():\n    return f\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    failed = _import_each(["circ.a"], env)
    assert "circ.a" in failed and "ImportError" in failed["circ.a"], failed


_LIBRARY_USE = r"""
import json, sys
import numpy as np
from onnx import TensorProto, helper
import onnxjit
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
model = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
                          opset_imports=[helper.make_opsetid("", 21)])
rep = onnxjit.prepare(model, "CPU")
a = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
assert np.array_equal(rep.run([a])[0], np.maximum(a, 0))
str(rep.explain()); rep._repr_html_(); rep.source()
sess = onnxjit.InferenceSession(model.SerializeToString())
sess.run(None, {"x": a})
print(json.dumps(sorted(m for m in sys.modules if m.startswith("onnxjit"))))
"""


def test_using_the_library_loads_no_tooling():
    """prepare, run, explain, the HTML view and a session load no tooling module."""
    out = subprocess.run([sys.executable, "-c", _LIBRARY_USE], capture_output=True, text=True,
                         timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "onnxjit.backend" in loaded and "onnxjit.explain" in loaded, loaded
    assert not [m for m in loaded if is_tooling(m)], loaded


def test_old_paths_are_the_tools_modules():
    """The shims at the old paths give the tools' modules themselves (monkeypatching either works)."""
    import onnxjit.bench
    import onnxjit.conformance
    import onnxjit.models
    import onnxjit.tools.bench
    import onnxjit.tools.conformance
    import onnxjit.tools.models
    assert onnxjit.bench is onnxjit.tools.bench
    assert onnxjit.conformance is onnxjit.tools.conformance
    assert onnxjit.models is onnxjit.tools.models
    from onnxjit.__main__ import main
    from onnxjit.explain import show_main
    from onnxjit.tools.cli import main as cli_main
    from onnxjit.tools.show import show_main as tools_show_main
    assert main is cli_main and show_main is tools_show_main


def test_one_random_inputs_helper():
    """The CLI, bench, show and explain's callers draw inputs with onnxjit.inputs, one function."""
    import onnxjit.inputs
    import onnxjit.tools.bench
    import onnxjit.tools.cli
    import onnxjit.tools.show
    assert onnxjit.tools.cli.random_inputs is onnxjit.inputs.random_inputs
    assert onnxjit.tools.show.random_inputs is onnxjit.inputs.random_inputs
    assert onnxjit.tools.bench.model_inputs is onnxjit.inputs.model_inputs
    assert onnxjit.tools.bench.parse_dims is onnxjit.inputs.parse_dims


def test_kernels_import_only_public_names_of_their_siblings():
    """kernels/ is layered (simd, parallel, micro-kernels, then the kernels): a kernel module
    uses what a sibling exports, never its private names (`from .conv import _x`, or
    `sgemm._x`), so each module's private helpers can change without breaking another's."""
    found = []
    kernels = PACKAGE / "kernels"
    siblings = {p.stem for p in kernels.glob("*.py")}
    for path in sorted(kernels.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in siblings:
                found += [f"{path.name}: from .{node.module} import {a.name}"
                          for a in node.names if a.name.startswith("_")]
            elif (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                  and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                  and node.value.id in siblings and node.value.id != path.stem):
                found.append(f"{path.name}: {node.value.id}.{node.attr}")
    assert not found, found
