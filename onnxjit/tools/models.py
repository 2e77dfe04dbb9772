"""The built-in benchmark suite: small models built with `onnx.helper` (no downloads).

Weights come from a seeded numpy RNG, so every build of a model is byte-identical (and so is the code
onnxjit generates for it, which keeps the disk cache warm between runs). Opset 21 throughout.
"""
from __future__ import annotations

import glob
import math
import os
import re

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


def logistic_regression(rows=1000, features=100, classes=3):
    """A multinomial logistic regression as skl2onnx writes one (LinearClassifier under SOFTMAX,
    then Normalizer L1; its ZipMap left out, so the output is the probability tensor)."""
    rng = np.random.default_rng(SEED + 2)
    coef = (rng.standard_normal(classes * features) * 0.1).astype(np.float32)
    lin = helper.make_node("LinearClassifier", ["x"], ["label", "probability_tensor"],
                           domain="ai.onnx.ml", name="LinearClassifier",
                           classlabels_ints=list(range(classes)), coefficients=coef.tolist(),
                           intercepts=rng.standard_normal(classes).astype(np.float32).tolist(),
                           multi_class=1, post_transform="SOFTMAX")
    norm = helper.make_node("Normalizer", ["probability_tensor"], ["probabilities"],
                            domain="ai.onnx.ml", name="Normalizer", norm="L1")
    graph = helper.make_graph([lin, norm], "logistic_regression", [_f32("x", [rows, features])],
                              [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                                             [rows, classes])])
    return helper.make_model(graph, producer_name="onnxjit.models", opset_imports=[
        helper.make_opsetid("", OPSET), helper.make_opsetid("ai.onnx.ml", 1)])



# -- model families beyond the classic suite (issue 20): RNNs, mobile CNNs, detectors, int8 -----
def _bias(b, n, scale=0.01):
    return b.const("bias", (b.rng.standard_normal(n) * scale).astype(np.float32))


def _recurrent(op, seq=100, batch=1, inputs=64, hidden=128, layers=2):
    """`layers` stacked LSTM/GRU nodes as torch.onnx exports nn.LSTM / nn.GRU (ONNX gate order,
    one B of W and R biases, Squeeze of the direction axis between layers; GRU with
    linear_before_reset=1). Output: the last layer's Y, (seq, batch, hidden)."""
    gates = {"LSTM": 4, "GRU": 3}[op]
    b = _Builder(op.lower())
    h, n_in = "x", inputs
    axes = b.const("axes", np.array([1], np.int64))
    for _ in range(layers):
        w = b.weight("W", (1, gates * hidden, n_in), 3 * hidden)
        r = b.weight("R", (1, gates * hidden, hidden), 3 * hidden)
        bias = _bias(b, (1, 2 * gates * hidden), 0.1)
        attrs = {"hidden_size": hidden}
        if op == "GRU":
            attrs["linear_before_reset"] = 1
        y = b.op(op, [h, w, r, bias], **attrs)        # Y: (seq, 1, batch, hidden)
        h, n_in = b.op("Squeeze", [y, axes]), hidden
    return b.model([_f32("x", [seq, batch, inputs])],
                   [_output(b, h, "y", [seq, batch, hidden])])


def lstm(seq=100, batch=1, inputs=64, hidden=128, layers=2):
    """A 2-layer LSTM over 100 steps, batch 1, hidden 128 (torch.onnx's export of nn.LSTM)."""
    return _recurrent("LSTM", seq, batch, inputs, hidden, layers)


def gru(seq=100, batch=1, inputs=64, hidden=128, layers=2):
    """A 2-layer GRU over 100 steps, batch 1, hidden 128 (torch.onnx's export of nn.GRU)."""
    return _recurrent("GRU", seq, batch, inputs, hidden, layers)


def _conv(b, x, c_in, c_out, k=1, stride=1, group=1, act=None):
    """Conv (BatchNormalization folded into weights and bias, as exporters write it) + act."""
    w = b.weight("conv_w", (c_out, c_in // group, k, k), c_in // group * k * k)
    y = b.op("Conv", [x, w, _bias(b, c_out, 0.1)], kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4, group=group)
    return _act(b, y, act)


def _act(b, x, act):
    if act == "relu6":
        return b.op("Clip", [x, b.const("zero", _scalar(0.0)), b.const("six", _scalar(6.0))])
    if act == "hswish":
        return b.op("HardSwish", [x])
    if act == "silu":       # torch.onnx: x * sigmoid(x)
        return b.op("Mul", [x, b.op("Sigmoid", [x])])
    if act == "relu":
        return b.op("Relu", [x])
    return x


# MobileNetV2's inverted residual settings (expansion, channels, repeats, stride); the later
# stages use HardSwish as MobileNetV3 does.
_MOBILE_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                  (6, 160, 3, 2), (6, 320, 1, 1))


def mobilenet(size=224, width=1.0, stages=_MOBILE_STAGES, classes=1000, last=1280):
    """A MobileNetV2/V3-style CNN: inverted residuals (1x1 expand, 3x3 depthwise, 1x1 project,
    residual Add), ReLU6 (Clip) in the early stages and HardSwish in the late ones."""
    b = _Builder("mobilenet")

    def ch(c):
        return max(8, int(c * width + 4) // 8 * 8)
    c_in = ch(32)
    h = _conv(b, "x", 3, c_in, 3, 2, act="hswish")
    for i, (t, c, n, s) in enumerate(stages):
        act, c_out = ("relu6" if i < len(stages) // 2 else "hswish"), ch(c)
        for j in range(n):
            stride, x = (s if j == 0 else 1), h
            hidden = c_in * t
            if t != 1:
                h = _conv(b, h, c_in, hidden, 1, act=act)
            h = _conv(b, h, hidden, hidden, 3, stride, group=hidden, act=act)
            h = _conv(b, h, hidden, c_out, 1)
            if stride == 1 and c_in == c_out:
                h = b.op("Add", [h, x])
            c_in = c_out
    h = _conv(b, h, c_in, last, 1, act="hswish")
    flat = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    w = b.weight("fc_w", (classes, last), last)
    y = b.op("Gemm", [flat, w, _bias(b, classes)], transB=1)
    return b.model([_f32("x", [1, 3, size, size])], [_output(b, y, "y", [1, classes])])


def _c2f(b, x, c, n, shortcut=True):
    """YOLOv8's C2f: 1x1 conv, Split in two, n bottlenecks on the second half (each one's output
    kept), Concat of all, 1x1 conv."""
    half = c // 2
    y = _conv(b, x, c, c, 1, act="silu")
    split = b.fresh("split")
    parts = [split + "_a", split + "_b"]
    b.nodes.append(helper.make_node("Split", [y, b.const("halves", np.array([half, half],
                                                                              np.int64))],
                                    parts, name=split + "_node", axis=1))
    outs, h = list(parts), parts[1]
    for _ in range(n):
        z = _conv(b, _conv(b, h, half, half, 3, act="silu"), half, half, 3, act="silu")
        h = b.op("Add", [h, z]) if shortcut else z
        outs.append(h)
    cat = b.op("Concat", outs, axis=1)
    return _conv(b, cat, (2 + n) * half, c, 1, act="silu")


def yolo_csp(size=320, widths=(16, 32, 64, 128, 256), depths=(1, 2, 2, 1), classes=80):
    """A YOLOv8-style CSP stack: stride-2 Conv + SiLU stages with C2f blocks (Split/Concat), an
    SPPF (MaxPool 5x5 thrice), a top-down neck (nearest Resize x2, Concat, C2f) and 1x1 heads at
    strides 8, 16 and 32 (box 64 + class channels)."""
    b = _Builder("yolo_csp")
    h = _conv(b, "x", 3, widths[0], 3, 2, act="silu")
    feats = []
    for i, (c_in, c) in enumerate(zip(widths[:-1], widths[1:])):
        h = _c2f(b, _conv(b, h, c_in, c, 3, 2, act="silu"), c, depths[i])
        feats.append((h, c))
    # SPPF
    c = widths[-1]
    h = _conv(b, h, c, c // 2, 1, act="silu")
    pools = [h]
    for _ in range(3):
        pools.append(b.op("MaxPool", [pools[-1]], kernel_shape=[5, 5], pads=[2, 2, 2, 2]))
    h = _conv(b, b.op("Concat", pools, axis=1), 2 * c, c, 1, act="silu")
    # neck: top-down
    scales = b.const("scales", np.array([1, 1, 2, 2], np.float32))
    heads, c_top = [h], c
    for f, cf in reversed(feats[1:-1]):
        up = b.op("Resize", [heads[-1], "", scales], mode="nearest")
        cat = b.op("Concat", [up, f], axis=1)
        h = _conv(b, cat, c_top + cf, cf, 1, act="silu")
        heads.append(_c2f(b, h, cf, 1, shortcut=False))
        c_top = cf
    outputs = []
    for h, c in zip(heads, (widths[-1], *reversed(widths[2:-1]))):
        y = _conv(b, _conv(b, h, c, c, 3, act="silu"), c, 64 + classes, 1)
        outputs.append(y)
    # one output: every head's predictions, flattened and concatenated (as YOLO's export does)
    shape = b.const("flat_shape", np.array([1, 64 + classes, -1], np.int64))
    flats = [b.op("Reshape", [y, shape]) for y in outputs]
    y = b.op("Concat", flats, axis=2)
    n = sum((size // s) ** 2 for s in (32, 16, 8)[:len(outputs)])
    return b.model([_f32("x", [1, 3, size, size])], [_output(b, y, "y", [1, 64 + classes, n])])


def seg_decoder(size=320, widths=(16, 32, 64, 128), fpn=64):
    """A DBNet-style text-detection net: a stride-2 Conv + HardSwish encoder, an FPN (1x1
    laterals, bilinear Resize x2 and Add top-down, each level resized to 1/4 and
    concatenated), and the head: Conv 3x3 + Relu, then two ConvTranspose 2x2 stride 2 back to
    full resolution, Sigmoid."""
    b = _Builder("seg_decoder")
    h, c_in, feats = "x", 3, []
    for i, c in enumerate(widths):
        h = _conv(b, h, c_in, c, 3, 2, act="hswish")
        if i:
            h = _conv(b, h, c, c, 3, 1, act="hswish")
        feats.append((h, c))
        c_in = c
    feats = feats[1:]                               # strides 4, 8, 16
    laterals = [_conv(b, f, c, fpn, 1) for f, c in feats]
    up2 = b.const("up2", np.array([1, 1, 2, 2], np.float32))
    top = laterals[-1]
    merged = [top]
    for lat in reversed(laterals[:-1]):
        top = b.op("Add", [b.op("Resize", [top, "", up2], mode="linear"), lat])
        merged.append(top)
    merged = list(reversed(merged))                 # strides 4, 8, 16
    quarter = size // 4
    to_quarter = b.const("size", np.array([1, fpn // 4, quarter, quarter], np.int64))
    outs = []
    for m in merged:
        m = _conv(b, m, fpn, fpn // 4, 3)
        if m is not merged[0]:
            m = b.op("Resize", [m, "", "", to_quarter], mode="linear")
        outs.append(m)
    h = b.op("Concat", outs, axis=1)
    h = _conv(b, h, fpn // 4 * len(outs), fpn // 4, 3, act="relu")
    w1 = b.weight("deconv_w", (fpn // 4, fpn // 4, 2, 2), fpn // 4 * 4)
    h = b.op("Relu", [b.op("ConvTranspose", [h, w1, _bias(b, fpn // 4, 0.1)], kernel_shape=[2, 2],
                           strides=[2, 2])])
    w2 = b.weight("deconv_w", (fpn // 4, 1, 2, 2), fpn // 4 * 4)
    y = b.op("Sigmoid", [b.op("ConvTranspose", [h, w2, _bias(b, 1, 0.1)], kernel_shape=[2, 2],
                              strides=[2, 2])])
    return b.model([_f32("x", [1, 3, size, size])], [_output(b, y, "y", [1, 1, size, size])])


def _qdense(b, x, n_in, n_out):
    """A dense layer as onnxruntime's quantize_dynamic writes it: DynamicQuantizeLinear of the
    activations (uint8; one per input tensor), MatMulInteger with int8 weights, Cast, Mul by
    both scales, Add bias."""
    w = b.rng.standard_normal((n_in, n_out)) * math.sqrt(2.0 / n_in)
    w_scale = np.float32(np.abs(w).max() / 127.0)
    wq = b.const("w_q", np.clip(np.round(w / w_scale), -127, 127).astype(np.int8))
    w_zp = b.const("w_zp", np.array(0, np.int8))
    quantized = b.__dict__.setdefault("quantized", {})   # one DynamicQuantizeLinear per input,
    if x not in quantized:                                # as quantize_dynamic shares them
        qname = b.fresh("dql")
        quantized[x] = (qname + "_y", qname + "_scale", qname + "_zp")
        b.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], list(quantized[x]),
                                        name=qname + "_node"))
    q, scale, zp = quantized[x]
    acc = b.op("MatMulInteger", [q, wq, zp, w_zp])
    s = b.op("Mul", [scale, b.const("w_scale", np.array(w_scale, np.float32))])
    y = b.op("Mul", [b.op("Cast", [acc], to=TensorProto.FLOAT), s])
    return b.op("Add", [y, _bias(b, n_out)])


def int8_transformer(seq=128, d_model=256, heads=4, ffn=None):
    """transformer_block with every weight MatMul dynamically quantized to int8 (the
    attention products stay float), as onnxruntime.quantization.quantize_dynamic leaves it."""
    if d_model % heads:
        raise ValueError(f"d_model {d_model} is not divisible by heads {heads}")
    ffn = ffn or 4 * d_model
    dh = d_model // heads
    b = _Builder("int8_transformer")
    x = _layer_norm(b, "x", d_model)
    split = b.const("split_shape", np.array([1, seq, heads, dh], dtype=np.int64))
    q, k, v = (b.op("Reshape", [_qdense(b, x, d_model, d_model), split]) for _ in range(3))
    q = b.op("Transpose", [q], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [k], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [v], perm=[0, 2, 1, 3])
    scores = b.op("Mul", [b.op("MatMul", [q, k]), b.const("scale", _scalar(1.0 / math.sqrt(dh)))])
    ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    ctx = b.op("Transpose", [ctx], perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [ctx, b.const("merge_shape", np.array([1, seq, d_model], np.int64))])
    h = b.op("Add", ["x", _qdense(b, merged, d_model, d_model)])
    f = _qdense(b, _gelu(b, _qdense(b, _layer_norm(b, h, d_model), d_model, ffn)), ffn, d_model)
    y = b.op("Add", [h, f])
    shape = [1, seq, d_model]
    return b.model([_f32("x", shape)], [_output(b, y, "y", shape)])


def tiny_stateful(frame=128, hidden=64, blocks=8):
    """A streaming model's step (~0.1 ms): a frame of features through `blocks` small residual
    blocks (MatMul, Add, LayerNorm spelled out in ReduceMean/Sub/Mul/Sqrt/Div, Relu), an LSTM
    cell (seq 1) with state inputs and outputs, and an If on a bool input choosing the head.
    Inputs: x [1, frame], h [1, 1, hidden], c [1, 1, hidden], cond (bool scalar);
    outputs y [1, 1], h_out, c_out."""
    b = _Builder("tiny_stateful")
    h = _dense(b, "x", frame, hidden)
    axes = b.const("axes", np.array([-1], np.int64))
    eps = b.const("eps", _scalar(1e-5))
    for _ in range(blocks):
        z = b.op("Relu", [_dense(b, h, hidden, hidden)])
        z = _dense(b, z, hidden, hidden)
        s = b.op("Add", [h, z])
        mean = b.op("ReduceMean", [s, axes], keepdims=1)
        d = b.op("Sub", [s, mean])
        var = b.op("ReduceMean", [b.op("Mul", [d, d]), axes], keepdims=1)
        h = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [var, eps])])])
    seq_x = b.op("Unsqueeze", [h, b.const("axis0", np.array([0], np.int64))])  # [1, 1, hidden]
    w = b.weight("W", (1, 4 * hidden, hidden), hidden)
    r = b.weight("R", (1, 4 * hidden, hidden), hidden)
    bias = _bias(b, (1, 8 * hidden), 0.1)
    name = b.fresh("lstm")
    b.nodes.append(helper.make_node("LSTM", [seq_x, w, r, bias, "", "h", "c"],
                                    [name + "_y", "h_out", "c_out"], name=name + "_node",
                                    hidden_size=hidden))
    feat = b.op("Reshape", ["h_out", b.const("flat", np.array([1, hidden], np.int64))])

    def branch(tag):
        sub = _Builder(f"{tag}_branch", seed=SEED + len(tag))
        sub._count = b._count + 1000 * len(tag)
        wb = sub.weight("head_w", (hidden, 1), hidden)
        sub.op("Sigmoid", [sub.op("MatMul", [feat, wb])])
        sub.nodes[-1].output[0] = f"{tag}_y"
        return helper.make_graph(sub.nodes, f"{tag}_branch", [], [_f32(f"{tag}_y", [1, 1])],
                                 initializer=sub.inits)
    y = b.op("If", ["cond"], then_branch=branch("speech"), else_branch=branch("silence"))
    outputs = [_output(b, y, "y", [1, 1]), _f32("h_out", [1, 1, hidden]),
               _f32("c_out", [1, 1, hidden])]
    inputs = [_f32("x", [1, frame]), _f32("h", [1, 1, hidden]), _f32("c", [1, 1, hidden]),
              helper.make_tensor_value_info("cond", TensorProto.BOOL, [])]
    return b.model(inputs, outputs)


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
            "forest_classifier": forest_classifier, "gbm_regressor": gbm_regressor,
            "logistic_regression": logistic_regression}
# the families of issue 20 (RNNs, mobile CNNs, detectors, a tiny stateful step, int8)
BUILDERS.update({"lstm": lstm, "gru": gru, "tiny_stateful": tiny_stateful,
                 "mobilenet": mobilenet, "yolo_csp": yolo_csp, "seg_decoder": seg_decoder,
                 "int8_transformer": int8_transformer})


def builtin_suite(weights="random", only=None):
    """[(name, ModelProto or path)] in benchmark order: generated models first, then the light
    models, with random weights (see ``with_random_weights``) or as shipped (their paths).
    `only`: a regex on the names, applied before any model is built (building them all takes
    ~14 s, VGG-19's random weights most of it)."""
    pattern = re.compile(only) if only else None

    def wanted(name):
        return pattern is None or pattern.search(name) is not None
    suite = [(name, build()) for name, build in BUILDERS.items() if wanted(name)]
    light = [name for name in light_models() if wanted(name)]
    if weights == "shipped":
        paths = light_models()
        return suite + [(name, paths[name]) for name in light]
    return suite + [(name, light_model(name)) for name in light]
