"""Stride-2 Conv over few input channels (onnxjit.kernels.conv_s2), through the backend.

Oracle: onnxruntime on the same one-graph model Conv [-> Add(res)] [-> Relu], 1 thread; errors
relative to the rounding scale of the float32 dot products (the conv of |x| and |w|), as in
test_conv_packed.  Covered: the stems it was written for (SqueezeNet's 3x3 unpadded,
ShuffleNet's 3x3 pad 1, ResNet's 7x7 pad 3), even and 1-wide kernels, asymmetric kernels and
pads, rows wider than two 16-output blocks with a partial last one, kernels that overhang a
small input, a batch of 2, output channels that are no multiple of 8, the Relu and residual
epilogue, on 1 and 2 Numba threads; and which convs the lowering sends there.
"""
import numpy as np
import pytest

from onnxjit.kernels import conv_s2
from onnxjit.kernels.sgemm import has_avx512
from test_conv_packed import check_conv_matches_ort

pytestmark = pytest.mark.skipif(not has_avx512(), reason="conv_s2 runs on AVX-512 CPUs only")

CASES = [
    # (N, C, (H, W), M, kernel, pads)
    (1, 3, (57, 57), 64, (3, 3), (0, 0, 0, 0)),     # SqueezeNet's stem
    (1, 3, (64, 64), 24, (3, 3), (1, 1, 1, 1)),     # ShuffleNet's
    (2, 3, (40, 38), 16, (7, 7), (3, 3, 3, 3)),     # ResNet's, a batch of 2
    (1, 1, (31, 70), 10, (5, 3), (2, 1, 0, 2)),     # asymmetric; 3 blocks, the last partial
    (1, 4, (9, 9), 8, (2, 2), (0, 0, 1, 1)),        # even kernel
    (1, 2, (17, 33), 13, (1, 1), (0, 0, 0, 0)),     # 1x1
    (1, 3, (5, 4), 9, (7, 7), (3, 3, 3, 3)),        # kernel overhangs the input
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[1]}x{c[2]}k{c[4]}p{c[5]}")
@pytest.mark.parametrize("res,relu", [(False, False), (False, True), (True, True)])
def test_conv_s2_matches_ort(case, res, relu, threads):
    n, c, spatial, m, kernel, pads = case
    attrs = dict(kernel_shape=list(kernel), strides=[2, 2], pads=list(pads))
    check_conv_matches_ort((n, c) + spatial, (m, c) + kernel, attrs, res, relu, threads,
                           "__k_conv_s2.conv_s2(")


@pytest.mark.parametrize("c,kernel,strides,dil,group,dtype,want", [
    (3, (3, 3), (2, 2), (1, 1), 1, np.float32, True),
    (3, (7, 7), (2, 2), (1, 1), 1, np.float32, True),
    (5, (3, 3), (2, 2), (1, 1), 1, np.float32, False),     # more channels: im2col + GEMM
    (4, (7, 7), (2, 2), (1, 1), 1, np.float32, False),     # 196 taps
    (3, (3, 3), (1, 1), (1, 1), 1, np.float32, False),     # stride 1
    (3, (3, 3), (2, 2), (2, 2), 1, np.float32, False),     # dilated
    (3, (3, 3), (2, 2), (1, 1), 3, np.float32, False),     # grouped
    (3, (3, 3), (2, 2), (1, 1), 1, np.float64, False),
    (3, (3,), (2,), (1,), 1, np.float32, False),           # 1-D
])
def test_which_convs_run_direct(c, kernel, strides, dil, group, dtype, want):
    """The choice follows the target description handed in, not the machine running the test:
    only AVX-512 runs the direct kernel."""
    from onnxjit.target import Target
    avx512, avx2 = Target("avx512", 512), Target("avx2", 256)
    assert conv_s2.use_s2(c, kernel, strides, dil, group, dtype, avx512) == want
    assert not conv_s2.use_s2(c, kernel, strides, dil, group, dtype, avx2)


def test_packed_weights_must_match():
    x = np.zeros((1, 3, 9, 9), np.float32)
    wq = conv_s2.pack_s2(np.zeros((8, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="packed weights do not match"):
        conv_s2.conv_s2(x, wq, 8, (5, 5), np.zeros(8, np.float32), (0, 0, 0, 0), 0,
                        np.empty((0, 0, 0, 0), np.float32), (0.0, 0.0))
