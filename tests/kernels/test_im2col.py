"""kernels/conv.py's im2col_span (and im2col_rows, its whole-row form): the column matrix of
output-pixel runs that start and end anywhere, checked through W @ columns against
onnx.reference.ReferenceEvaluator's Conv. Geometries: the contiguous-copy path (stride 1,
"same" width: pads one side or both, dilation down, one-column and one-row images) and the
run-per-row path (strides, dilation across, pads as wide as the input, valid convs)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from onnxjit.kernels.conv import im2col_rows, im2col_span

I1 = np.int64(1)
I0 = np.int64(0)


def _conv_ref(x, w, strides, pads, dilations):
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=list(w.shape[2:]),
                            strides=list(strides), pads=[pads[0], pads[1], pads[2], pads[3]],
                            dilations=list(dilations))
    return ReferenceEvaluator(node).run(None, {"x": x, "w": w})[0]


# (C, H, W, KH, KW, strides, pads (top, left, bottom, right), dilations)
CASES = [
    (3, 9, 11, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),      # the 3x3 "same" conv
    (2, 7, 6, 3, 3, (1, 1), (0, 2, 1, 0), (1, 1)),       # pads on one side across
    (2, 10, 8, 3, 3, (1, 1), (2, 1, 2, 1), (2, 1)),      # dilation down
    (1, 5, 1, 3, 1, (1, 1), (1, 0, 1, 0), (1, 1)),       # one column
    (2, 1, 9, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1)),       # one row
    (2, 6, 2, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),       # pads half the width
    (3, 9, 11, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),      # stride 2: runs per row
    (2, 8, 9, 3, 3, (1, 1), (1, 2, 1, 2), (1, 2)),       # dilation across
    (2, 4, 3, 3, 3, (1, 1), (3, 3, 3, 3), (1, 1)),       # pads as wide as the input
    (2, 7, 7, 3, 3, (1, 1), (0, 0, 0, 0), (1, 1)),       # valid
]


@pytest.mark.parametrize("case", CASES)
def test_columns_of_any_pixel_runs_match_the_reference_conv(case):
    C, H, W, KH, KW, strides, pads, dil = case
    rng = np.random.default_rng(sum(case[:5]))
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    w = rng.standard_normal((4, C, KH, KW)).astype(np.float32)
    ref = _conv_ref(x, w, strides, pads, dil)
    OH, OW = ref.shape[2:]
    P = OH * OW
    kk = C * KH * KW
    geo = dict(in3=(I1, np.int64(H), np.int64(W)), k3=(I1, np.int64(KH), np.int64(KW)),
               s3=(I1, np.int64(strides[0]), np.int64(strides[1])),
               p6=(I0, np.int64(pads[0]), np.int64(pads[1]), I0, np.int64(pads[2]),
                   np.int64(pads[3])),
               d3=(I1, np.int64(dil[0]), np.int64(dil[1])), o3=(I1, np.int64(OH), np.int64(OW)))
    xf = np.concatenate([np.full(7, np.nan, np.float32), x.ravel(),
                         np.full(7, np.nan, np.float32)])   # reads outside x would show as NaN
    cuts = sorted({0, P, *(c for c in (1, 5, OW + 1, P // 2, P - 3) if 0 < c < P)})
    blocks = []
    for p0, p1 in zip(cuts, cuts[1:]):
        col = np.full(kk * (p1 - p0) + 5, np.nan, np.float32)   # writes past it would show
        im2col_span(xf, np.int64(7), np.int64(C), geo["in3"], geo["k3"], geo["s3"], geo["p6"],
                    geo["d3"], geo["o3"], np.int64(p0), np.int64(p1), col)
        assert np.isnan(col[kk * (p1 - p0):]).all()
        blocks.append(col[:kk * (p1 - p0)].reshape(kk, p1 - p0))
    cols = np.concatenate(blocks, axis=1)
    assert not np.isnan(cols).any()
    y = (w.reshape(4, kk).astype(np.float64) @ cols.astype(np.float64)).reshape(ref.shape)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    whole = np.empty(kk * P, np.float32)
    im2col_rows(xf, np.int64(7), np.int64(C), geo["in3"], geo["k3"], geo["s3"], geo["p6"],
                geo["d3"], geo["o3"], I0, np.int64(OH), whole)
    np.testing.assert_array_equal(whole.reshape(kk, P), cols)
