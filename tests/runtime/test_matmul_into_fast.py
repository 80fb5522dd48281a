"""The matrix rules' first case: float matrices of one dtype with buffers that
fit go straight to ``np.matmul(..., out=buf)``; anything else takes the general
path.  Both give the same bits as the products written out."""

import numpy as np
import pytest

from s2sad.runtime.contractions import d_matmul, d_matmul_lhs, d_matmul_rhs


def _ops(dtype, rng, n=7, k=5, m=3):
    x = rng.normal(size=(n, k)).astype(dtype)
    y = rng.normal(size=(k, m)).astype(dtype)
    g = rng.normal(size=(n, m)).astype(dtype)
    return g, x, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_buffers_that_fit_are_written(dtype):
    g, x, y = _ops(dtype, np.random.default_rng(0))
    bx, by = np.empty_like(x), np.empty_like(y)
    gx, gy = d_matmul(g, None, x, y, into=(bx, by))
    assert gx is bx and gy is by
    np.testing.assert_array_equal(gx, g @ y.T)
    np.testing.assert_array_equal(gy, x.T @ g)
    (gx1,) = d_matmul_lhs(g, None, x, y, into=(np.empty_like(x),))
    (gy1,) = d_matmul_rhs(g, None, x, y, into=(np.empty_like(y),))
    np.testing.assert_array_equal(gx1, g @ y.T)
    np.testing.assert_array_equal(gy1, x.T @ g)


def _bad_buffers(x):
    ro = np.empty_like(x)
    ro.flags.writeable = False
    return [
        np.asfortranarray(np.empty_like(x)),
        np.empty(x.shape, np.float16),
        np.empty(x.shape[::-1]).T,
        ro,
        None,
    ]


@pytest.mark.parametrize("which", range(5))
def test_buffers_that_do_not_fit_are_not_used(which):
    g, x, y = _ops(np.float64, np.random.default_rng(1))
    bad = _bad_buffers(x)[which]
    gx, gy = d_matmul(g, None, x, y, into=(bad, np.empty_like(y)))
    assert gx is not bad
    np.testing.assert_array_equal(gx, g @ y.T)
    np.testing.assert_array_equal(gy, x.T @ g)
    (gx1,) = d_matmul_lhs(g, None, x, y, into=(bad,))
    assert gx1 is not bad
    np.testing.assert_array_equal(gx1, g @ y.T)
    bad_y = _bad_buffers(y)[which]
    (gy1,) = d_matmul_rhs(g, None, x, y, into=(bad_y,))
    assert gy1 is not bad_y
    np.testing.assert_array_equal(gy1, x.T @ g)


def test_mixed_dtypes_and_vectors_take_the_general_path():
    rng = np.random.default_rng(2)
    g, x, y = _ops(np.float64, rng)
    x32 = x.astype(np.float32)
    bx, by = np.empty_like(x32), np.empty_like(y)
    gx, gy = d_matmul(g, None, x32, y, into=(bx, by))
    np.testing.assert_allclose(gx, g @ y.T, rtol=1e-6)
    np.testing.assert_allclose(gy, x32.T @ g, rtol=1e-6)
    v = rng.normal(size=5)
    gv = rng.normal(size=7)
    gx, gy = d_matmul(gv, None, x, v, into=(np.empty_like(x), np.empty_like(v)))
    np.testing.assert_allclose(gx, np.outer(gv, v))
    np.testing.assert_allclose(gy, x.T @ gv)


def test_the_compiler_still_reads_the_left_cotangent_as_never_none():
    from s2sad.transforms.inline import definite_positions

    assert definite_positions(d_matmul_lhs) == {0}
