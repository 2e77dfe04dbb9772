"""The built-in benchmark suite: small models built with `onnx.helper` (no downloads).

Weights come from a seeded numpy RNG, so every build of a model is byte-identical (and so is the code
onnxjit generates for it, which keeps the disk cache warm between runs). Opset 21 throughout.
"""
from __future__ import annotations

import glob
import math
import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OPSET = 21
SEED = 20240601


class _Builder:
    """Collects nodes and initializers; names are generated so the graph reads top to bottom."""

    def __init__(self, name, seed=SEED):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self._count = [], [], 0

    def fresh(self, stem):
        self._count += 1
        return f"{stem}_{self._count}"

    def const(self, stem, array):
        """An initializer holding `array` (its dtype is kept)."""
        name = self.fresh(stem)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, stem, shape, fan_in):
        """He-initialized float32 weights, so activations stay O(1) through the layers."""
        w = self.rng.standard_normal(shape) * math.sqrt(2.0 / fan_in)
        return self.const(stem, w.astype(np.float32))

    def op(self, op_type, inputs, **attrs):
        """Add one node with a single fresh output; returns the output name."""
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out + "_node", **attrs))
        return out

    def model(self, inputs, outputs):
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, initializer=self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                 producer_name="onnxjit.models")


def _f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def _scalar(value):
    return np.array(value, dtype=np.float32)


def _gelu(b, x):
    """GELU, erf form: 0.5 * x * (1 + erf(x / sqrt(2)))."""
    e = b.op("Erf", [b.op("Div", [x, b.const("sqrt2", _scalar(math.sqrt(2.0)))])])
    half_x = b.op("Mul", [x, b.const("half", _scalar(0.5))])
    return b.op("Mul", [half_x, b.op("Add", [e, b.const("one", _scalar(1.0))])])


def _output(b, x, name, shape):
    """Make value `x` (the last node's output) the graph output `name`."""
    if b.nodes[-1].output[0] != x:
        raise ValueError(f"{x!r} is not the output of the last node")
    b.nodes[-1].output[0] = name
    return _f32(name, shape)


def one_node():
    """y = a + b on 4 floats: measures the per-call overhead."""
    node = helper.make_node("Add", ["a", "b"], ["y"], name="add")
    graph = helper.make_graph([node], "one_node", [_f32("a", [4]), _f32("b", [4])], [_f32("y", [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="onnxjit.models")


def elementwise_chain(rows=1024, cols=1024):
    """GELU (erf form) then a LayerNorm-style affine normalization, all elementwise (it fuses)."""
    b = _Builder("elementwise_chain")
    g = _gelu(b, "x")
    # Per-column statistics are initializers (as in inference-time normalization), not reductions,
    # so the whole chain stays elementwise and can become one loop nest.
    mean = b.const("mean", (b.rng.standard_normal(cols) * 0.1).astype(np.float32))
    var = b.const("var", (b.rng.random(cols) + 0.5).astype(np.float32))
    gamma = b.const("gamma", (b.rng.random(cols) + 0.5).astype(np.float32))
    beta = b.const("beta", (b.rng.standard_normal(cols) * 0.1).astype(np.float32))
    std = b.op("Sqrt", [b.op("Add", [var, b.const("eps", _scalar(1e-5))])])
    z = b.op("Div", [b.op("Sub", [g, mean]), std])
    y = b.op("Add", [b.op("Mul", [z, gamma]), beta])
    return b.model([_f32("x", [rows, cols])], [_output(b, y, "y", [rows, cols])])


def _dense(b, x, n_in, n_out):
    """x @ W + bias."""
    w = b.weight("w", (n_in, n_out), n_in)
    bias = b.const("bias", (b.rng.standard_normal(n_out) * 0.01).astype(np.float32))
    return b.op("Add", [b.op("MatMul", [x, w]), bias])


def mlp(batch=64, sizes=(784, 512, 512, 10)):
    """Dense layers (MatMul + Add, Relu between them): 784 -> 512 -> 512 -> 10 by default."""
    b = _Builder("mlp")
    h = "x"
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        h = _dense(b, h, n_in, n_out)
        if i < len(sizes) - 2:
            h = b.op("Relu", [h])
    return b.model([_f32("x", [batch, sizes[0]])], [_output(b, h, "y", [batch, sizes[-1]])])


def _layer_norm(b, x, d):
    gamma = b.const("ln_scale", (1.0 + 0.1 * b.rng.standard_normal(d)).astype(np.float32))
    beta = b.const("ln_bias", (0.1 * b.rng.standard_normal(d)).astype(np.float32))
    return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)


def _attention(b, x, seq, d_model, heads):
    """Multi-head self-attention on x [1, seq, d_model]."""
    dh = d_model // heads
    split = b.const("split_shape", np.array([1, seq, heads, dh], dtype=np.int64))
    q, k, v = (b.op("Reshape", [_dense(b, x, d_model, d_model), split]) for _ in range(3))
    q = b.op("Transpose", [q], perm=[0, 2, 1, 3])                  # [1, h, seq, dh]
    k = b.op("Transpose", [k], perm=[0, 2, 3, 1])                  # [1, h, dh, seq]
    v = b.op("Transpose", [v], perm=[0, 2, 1, 3])
    scores = b.op("Mul", [b.op("MatMul", [q, k]), b.const("scale", _scalar(1.0 / math.sqrt(dh)))])
    ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])  # [1, h, seq, dh]
    ctx = b.op("Transpose", [ctx], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const("merge_shape", np.array([1, seq, d_model], np.int64))])
    return _dense(b, merged, d_model, d_model)


def transformer_block(seq=128, d_model=256, heads=4, ffn=None):
    """A pre-LayerNorm transformer encoder block: attention and a GELU MLP, each with a residual."""
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    ffn = ffn or 4 * d_model
    b = _Builder("transformer_block")
    h = b.op("Add", ["x", _attention(b, _layer_norm(b, "x", d_model), seq, d_model, heads)])
    f = _dense(b, _gelu(b, _dense(b, _layer_norm(b, h, d_model), d_model, ffn)), ffn, d_model)
    y = b.op("Add", [h, f])
    shape = [1, seq, d_model]
    return b.model([_f32("x", shape)], [_output(b, y, "y", shape)])


def _conv_bn_relu(b, x, c_in, c_out):
    w = b.weight("conv_w", (c_out, c_in, 3, 3), c_in * 9)
    conv = b.op("Conv", [x, w], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scale = b.const("bn_scale", (1.0 + 0.1 * b.rng.standard_normal(c_out)).astype(np.float32))
    bias = b.const("bn_bias", (0.1 * b.rng.standard_normal(c_out)).astype(np.float32))
    mean = b.const("bn_mean", (0.1 * b.rng.standard_normal(c_out)).astype(np.float32))
    var = b.const("bn_var", (b.rng.random(c_out) + 0.5).astype(np.float32))
    return b.op("Relu", [b.op("BatchNormalization", [conv, scale, bias, mean, var], epsilon=1e-5)])


def small_cnn(size=64, channels=(16, 32, 64), classes=10):
    """(Conv 3x3 + BatchNormalization + Relu) x3 with MaxPools, GlobalAveragePool, Flatten, Gemm."""
    b = _Builder("small_cnn")
    h, c_in = "x", 3
    for i, c_out in enumerate(channels):
        h = _conv_bn_relu(b, h, c_in, c_out)
        if i < len(channels) - 1:
            h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
        c_in = c_out
    flat = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    w = b.weight("fc_w", (classes, c_in), c_in)
    fc_b = b.const("fc_b", np.zeros(classes, np.float32))
    y = b.op("Gemm", [flat, w, fc_b], transB=1)
    return b.model([_f32("x", [1, 3, size, size])], [_output(b, y, "y", [1, classes])])


def _random_tree(rng, tree, depth, n_features, cols, stop=0.0):
    """Append one random tree (node ids from 0, depth first) to the nodes_* lists in `cols`;
    its leaves as [(tree, node)]. From depth 3 a node becomes a leaf with probability `stop`."""
    leaves, ids = [], iter(range(1 << 30))

    def grow(d):
        me, i = next(ids), len(cols["nodes_treeids"])
        for k in cols:
            cols[k].append(0)
        cols["nodes_treeids"][i], cols["nodes_nodeids"][i] = tree, me
        if d == depth or (d >= 3 and rng.random() < stop):
            cols["nodes_modes"][i], cols["nodes_values"][i] = "LEAF", 0.0
            leaves.append((tree, me))
            return me
        cols["nodes_modes"][i] = "BRANCH_LEQ"
        cols["nodes_featureids"][i] = int(rng.integers(n_features))
        cols["nodes_values"][i] = float(np.float32(rng.standard_normal() * 0.8))
        cols["nodes_truenodeids"][i] = grow(d + 1)
        cols["nodes_falsenodeids"][i] = grow(d + 1)
        return me

    grow(0)
    return leaves


def _tree_model(name, node, n_features, rows, out, out_shape):
    graph = helper.make_graph([node], name, [_f32("x", [rows, n_features])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)])
    return helper.make_model(graph, producer_name="onnxjit.models", opset_imports=[
        helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", 3)])


def forest_classifier(rows=100, trees=100, depth=(8, 10), features=30, classes=3):
    """A random forest classifier as skl2onnx writes one (TreeEnsembleClassifier, each leaf
    holding every class's probability / trees): the output is the probabilities."""
    rng = np.random.default_rng(SEED)
    cols = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                            "nodes_values", "nodes_truenodeids", "nodes_falsenodeids")}
    w = {k: [] for k in ("class_treeids", "class_nodeids", "class_ids", "class_weights")}
    for t in range(trees):
        for tree, leaf in _random_tree(rng, t, int(rng.integers(depth[0], depth[1] + 1)),
                                       features, cols, stop=0.15):
            p = rng.dirichlet(np.ones(classes)) / trees
            for c in range(classes):
                for k, v in zip(w, (tree, leaf, c, float(np.float32(p[c])))):
                    w[k].append(v)
    node = helper.make_node("TreeEnsembleClassifier", ["x"], ["label", "probabilities"],
                            domain="ai.onnx.ml", name="forest", post_transform="NONE",
                            classlabels_int64s=list(range(classes)), **cols, **w)
    return _tree_model("forest_classifier", node, features, rows, "probabilities",
                       [rows, classes])


def gbm_regressor(rows=100, trees=200, depth=5, features=30):
    """A gradient-boosted regressor (TreeEnsembleRegressor, SUM of full trees + base value)."""
    rng = np.random.default_rng(SEED + 1)
    cols = {k: [] for k in ("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes",
                            "nodes_values", "nodes_truenodeids", "nodes_falsenodeids")}
    w = {k: [] for k in ("target_treeids", "target_nodeids", "target_ids", "target_weights")}
    for t in range(trees):
        for tree, leaf in _random_tree(rng, t, depth, features, cols):
            for k, v in zip(w, (tree, leaf, 0, float(np.float32(rng.standard_normal() * 0.1)))):
                w[k].append(v)
    node = helper.make_node("TreeEnsembleRegressor", ["x"], ["y"], domain="ai.onnx.ml",
                            name="gbm", n_targets=1, aggregate_function="SUM",
                            base_values=[0.5], **cols, **w)
    return _tree_model("gbm_regressor", node, features, rows, "y", [rows, 1])


def light_models():
    """{name: path} of the light models (AlexNet, ResNet-50, ...) that ship inside the onnx package."""
    import onnx.backend.test
    folder = os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light")
    paths = sorted(glob.glob(os.path.join(folder, "light_*.onnx")))
    return {os.path.basename(p)[:-len(".onnx")]: p for p in paths}


def with_random_weights(model, seed=SEED):
    """`model` with every float weight made by a ConstantOfShape of a constant shape (how the
    light models store theirs: 0.02 everywhere) replaced by a seeded random initializer of that
    shape, scaled for its consumer: He-normal Conv / Gemm / MatMul weights, BatchNormalization
    scales and variances in [0.5, 1.5], small shifts elsewhere.

    With every weight equal, every channel computes the same thing and the activations grow
    ~10x per stage (1e17 by ResNet-50's last block), so the outputs are a uniform softmax that
    any kernel bug leaves unchanged; random weights make the comparison with ONNX Runtime mean
    something while the work done stays exactly the same."""
    import onnx
    rng = np.random.default_rng(seed)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    consumers = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, (node, i))
    keep, made = [], []
    for node in graph.node:
        shape_init = inits.get(node.input[0]) if node.op_type == "ConstantOfShape" else None
        value = next((a.t for a in node.attribute if a.name == "value"), None)
        if (shape_init is None or value is None
                or value.data_type != TensorProto.FLOAT):
            keep.append(node)
            continue
        shape = tuple(int(d) for d in numpy_helper.to_array(shape_init))
        made.append(numpy_helper.from_array(
            _random_weight(rng, shape, *consumers.get(node.output[0], (None, 0))),
            node.output[0]))
    used = {name for node in keep for name in node.input}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    kept_inits = [t for t in graph.initializer if t.name in used]
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept_inits + made)
    real_inputs = [v for v in graph.input if v.name not in inits or v.name in used]
    if model.ir_version < 4:    # before IR 4 every initializer is also a graph input
        real_inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                        for t in made]
    del out.graph.input[:]
    out.graph.input.extend(real_inputs)
    return out


def _random_weight(rng, shape, consumer, index):
    """Random float32 values of `shape` for input `index` of `consumer` (see with_random_weights)."""
    op = consumer.op_type if consumer is not None else ""
    size = int(np.prod(shape))
    if op in ("Conv", "ConvTranspose") and index == 1 or op in ("Gemm", "MatMul") and index == 1:
        if op == "Gemm" and any(a.name == "transB" and a.i for a in consumer.attribute):
            fan_in = shape[-1]
        elif op in ("Conv", "ConvTranspose"):
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        else:
            fan_in = shape[0] if shape else 1
        values = rng.standard_normal(size) * math.sqrt(2.0 / max(fan_in, 1))
    elif op == "BatchNormalization" and index in (1, 4) or op == "Mul":
        values = rng.uniform(0.5, 1.5, size)
    else:
        values = rng.standard_normal(size) * 0.1
    return values.astype(np.float32).reshape(shape)


def light_model(name, weights="random"):
    """The onnx package's light model `name` (e.g. "light_resnet50") as a ModelProto, with
    random weights (``with_random_weights``) or the shipped constant ones (weights="shipped")."""
    import onnx
    paths = light_models()
    if name not in paths:
        raise ValueError(f"no light model {name!r}; there are {sorted(paths)}")
    model = onnx.load(paths[name])
    if weights != "random":
        return model
    model = with_random_weights(model)
    # Residual nets without trained batch statistics grow their activations block by block
    # (ResNet-50's logits reach 1e5): the softmax saturates to one-hot, which checks little
    # beyond the argmax.  The logits are a second output, so both engines are compared on them.
    last = model.graph.node[-1]
    outputs = {o.name: o for o in model.graph.output}
    if last.op_type == "Softmax" and last.output[0] in outputs and last.input[0] not in outputs:
        logits = model.graph.output.add()
        logits.CopyFrom(outputs[last.output[0]])      # Softmax keeps type and shape
        logits.name = last.input[0]
    return model


BUILDERS = {"one_node": one_node, "elementwise_chain": elementwise_chain, "mlp": mlp,
            "transformer_block": transformer_block, "small_cnn": small_cnn,
            "forest_classifier": forest_classifier, "gbm_regressor": gbm_regressor}


def builtin_suite(weights="random"):
    """[(name, ModelProto or path)] in benchmark order: generated models first, then the light
    models, with random weights (see ``with_random_weights``) or as shipped (their paths)."""
    suite = [(name, build()) for name, build in BUILDERS.items()]
    if weights == "shipped":
        return suite + list(light_models().items())
    return suite + [(name, light_model(name)) for name in light_models()]
