"""kernels/conv.py's im2col_span (and im2col_rows, its whole-row form): the column matrix of
output-pixel runs that start and end anywhere, checked through W @ columns against
onnx.reference.ReferenceEvaluator's Conv. Geometries: the contiguous-copy path (stride 1,
"same" width: pads one side or both, dilation down, one-column and one-row images) and the
run-per-row path (strides, dilation across, pads as wide as the input, valid convs, 3-D
convs, whose runs step through depth slices)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from onnxjit.kernels.conv import im2col_rows, im2col_span

I0 = np.int64(0)


def _conv_ref(x, w, strides, pads, dilations):
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=list(w.shape[2:]),
                            strides=list(strides), pads=list(pads), dilations=list(dilations))
    return ReferenceEvaluator(node).run(None, {"x": x, "w": w})[0]


# (C, H, W, KH, KW, strides, pads (top, left, bottom, right), dilations); 3-D cases add
# (D, KD, stride, (front, back), dilation) across depth
CASES = [
    (3, 9, 11, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),      # the 3x3 "same" conv
    (2, 7, 6, 3, 3, (1, 1), (0, 2, 1, 0), (1, 1)),       # pads on one side across
    (2, 10, 8, 3, 3, (1, 1), (2, 1, 2, 1), (2, 1)),      # dilation down
    (1, 5, 1, 3, 1, (1, 1), (1, 0, 1, 0), (1, 1)),       # one column
    (2, 1, 9, 1, 3, (1, 1), (0, 1, 0, 1), (1, 1)),       # one row
    (2, 6, 2, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1)),       # pads half the width
    (3, 9, 11, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),      # stride 2, odd width: a line buffer
    (2, 8, 12, 3, 3, (2, 2), (0, 1, 1, 0), (1, 1)),      # ... even width, pads after (TF's SAME)
    (3, 7, 10, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1)),      # ... the strided 1x1
    (2, 6, 9, 3, 5, (1, 2), (2, 2, 2, 2), (2, 1)),       # ... across only, dilation down
    (2, 5, 2, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1)),       # ... two columns
    (1, 6, 13, 3, 3, (3, 3), (1, 1, 1, 1), (1, 1)),      # stride 3: runs per row
    (2, 8, 9, 3, 3, (1, 1), (1, 2, 1, 2), (1, 2)),       # dilation across
    (2, 4, 3, 3, 3, (1, 1), (3, 3, 3, 3), (1, 1)),       # pads as wide as the input
    (2, 7, 7, 3, 3, (1, 1), (0, 0, 0, 0), (1, 1)),       # valid
    (2, 5, 6, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), (4, 3, 1, (1, 1), 1)),   # 3-D "same"
    (1, 6, 5, 3, 2, (2, 1), (1, 0, 0, 1), (1, 1), (5, 2, 2, (0, 1), 2)),   # 3-D strided
    # one input slice but taps or outputs across depth: not the 2-D loops
    (2, 6, 7, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), (1, 3, 1, (1, 1), 1)),   # 3 taps deep
    (2, 6, 8, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1, 1, (1, 0), 1)),   # 2 slices out
]


@pytest.mark.parametrize("case", CASES)
def test_columns_of_any_pixel_runs_match_the_reference_conv(case):
    C, H, W, KH, KW, strides, pads, dil = case[:8]
    D, KD, sd, (pf, pk), dd = case[8] if len(case) > 8 else (1, 1, 1, (0, 0), 1)
    rng = np.random.default_rng(sum(case[:5]))
    if len(case) > 8:
        x = rng.standard_normal((1, C, D, H, W)).astype(np.float32)
        w = rng.standard_normal((4, C, KD, KH, KW)).astype(np.float32)
        ref = _conv_ref(x, w, (sd, *strides), (pf, pads[0], pads[1], pk, pads[2], pads[3]),
                        (dd, *dil))
        OD = ref.shape[2]
    else:
        x = rng.standard_normal((1, C, H, W)).astype(np.float32)
        w = rng.standard_normal((4, C, KH, KW)).astype(np.float32)
        ref = _conv_ref(x, w, strides, pads, dil)
        OD = 1
    OH, OW = ref.shape[-2:]
    P = OD * OH * OW
    kk = C * KD * KH * KW
    i64 = np.int64
    geo = dict(in3=(i64(D), i64(H), i64(W)), k3=(i64(KD), i64(KH), i64(KW)),
               s3=(i64(sd), i64(strides[0]), i64(strides[1])),
               p6=(i64(pf), i64(pads[0]), i64(pads[1]), i64(pk), i64(pads[2]), i64(pads[3])),
               d3=(i64(dd), i64(dil[0]), i64(dil[1])), o3=(i64(OD), i64(OH), i64(OW)))
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
                geo["d3"], geo["o3"], I0, np.int64(OD * OH), whole)
    np.testing.assert_array_equal(whole.reshape(kk, P), cols)
