"""kernels/views.c_view: a C-contiguous array with another shape of the same size (what the fused
kernels see their operands and results through), checked against numpy's reshape."""
import numpy as np
import pytest
from numba import njit

from onnxjit.kernels.views import c_view


@njit
def _flat(a, n):
    return c_view(a, (n,))


@njit
def _three(a, s0, s1):
    return c_view(a, (s0, 1, s1))


def test_c_view_matches_reshape_and_shares_the_data():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = _three(x, 3, 4)
    assert y.shape == (3, 1, 4) and y.strides == x.reshape(3, 1, 4).strides
    np.testing.assert_array_equal(y, x.reshape(3, 1, 4))
    flat = _flat(x, 12)
    flat[0] = 99.0          # a view: no copy of a C-contiguous array
    assert x[0, 0] == 99.0


def test_c_view_copies_a_strided_array():
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    y = _flat(x.T, 12)
    np.testing.assert_array_equal(y, x.T.reshape(12))
    y[0] = -1
    assert x[0, 0] == 0


def test_c_view_of_a_0d_array():
    np.testing.assert_array_equal(_flat(np.array(2.5), 1), [2.5])


@pytest.mark.parametrize("dims", [(11,), (-3, -4)])
def test_c_view_refuses_a_shape_of_another_size(dims):
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="does not hold"):
        (_flat(x, *dims) if len(dims) == 1 else _three(x, *dims))
