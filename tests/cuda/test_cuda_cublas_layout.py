"""The cuBLAS route's operand layouts (cuda/cublas.operand), checked without a GPU: the flat
buffers read the way cuBLAS's column-major gemm reads them (op, leading dimension) must give
numpy's row-major product for every stride pattern the lowerings produce."""
import numpy as np
import pytest

from onnxjit.cuda.cublas import OP_N, operand


def as_cublas(flat, p, q, op, ld):
    """The p x q matrix op(M) that cuBLAS reads from `flat` given (op, ld)."""
    if op == OP_N:      # M stored column-major p x q
        return np.array([[flat[r + c * ld] for c in range(q)] for r in range(p)])
    return np.array([[flat[c + r * ld] for c in range(q)] for r in range(p)])  # M^T stored


@pytest.mark.parametrize("m,n,k", [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1)])
@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_operand_layouts_give_the_row_major_product(m, n, k, ta, tb):
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    a_flat = (A.T if ta else A).reshape(-1)       # A stored transposed or not
    b_flat = (B.T if tb else B).reshape(-1)
    sam, sak = (1, m) if ta else (k, 1)
    sbk, sbn = (1, k) if tb else (n, 1)
    x = operand(n, k, sbn, sbk)                   # B^T (n x k)
    y = operand(k, m, sak, sam)                   # A^T (k x m)
    assert x is not None and y is not None
    ct = as_cublas(b_flat, n, k, *x) @ as_cublas(a_flat, k, m, *y)   # C^T = B^T A^T
    np.testing.assert_allclose(ct.T, A @ B, rtol=1e-12)


def test_operand_refuses_strides_cublas_cannot_express():
    assert operand(3, 4, 2, 8) is None            # no unit stride either way
