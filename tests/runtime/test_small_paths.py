"""The runtime's fast paths for small arrays give what the general paths give:
same values bit for bit, same dtypes and shapes, same aliasing."""

from __future__ import annotations

import numpy as np
import pytest

from s2sad.runtime import contractions, reductions, support


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_matrix_vector_rhs_fast_path_is_the_vector_path(dtype, layout):
    rng = np.random.default_rng(2)
    x = rng.normal(size=(7, 10)).astype(dtype)
    if layout == "F":
        x = np.asfortranarray(x)
    elif layout == "strided":
        x = rng.normal(size=(7, 20)).astype(dtype)[:, ::2]
    y = rng.normal(size=10).astype(dtype)
    g = rng.normal(size=7).astype(dtype)
    got = contractions.d_matmul_rhs(g, x @ y, x, y)[0]
    want = contractions._vector_y(g, x, y, None)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == dtype and got.shape == y.shape
    # mixed dtypes and buffers still take the general path
    mixed = contractions.d_matmul_rhs(g.astype(np.float64), None, x, y)[0]
    assert mixed.shape == y.shape
    buf = np.empty(10, dtype)
    assert contractions.d_matmul_rhs(g, None, x, y, into=(buf,))[0] is buf


@pytest.mark.parametrize("n", [1, 7, 1000, 5000])
def test_unbroadcast_of_a_vector_to_a_float_sums_it_all(n):
    g = np.random.default_rng(n).normal(size=2 * n)[::2]
    got = support.unbroadcast(g, 0.5)
    assert got == g.sum(axis=(0,)) and type(got) is np.float64
    m = g[: (n // 2) * 2].reshape(-1, 2) if n > 1 else g.reshape(1, 1)
    assert support.unbroadcast(m, 0.5) == m.sum(axis=(0, 1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("g", [0.75, np.float64(-1.25), np.float32(2.5)])
def test_full_sum_and_mean_cotangents_are_filled_like_before(dtype, g):
    x = np.arange(6.0).reshape(2, 3).astype(dtype)
    for rule, value in ((reductions.d_sum, g), (reductions.d_mean, g / x.size)):
        ct = rule(g, None, x)[0]
        want = reductions.filled(value, x)
        np.testing.assert_array_equal(ct, want)
        assert ct.dtype == dtype and ct.flags.writeable and ct.base is None


def test_finalize_returns_a_fresh_gradient_and_copies_a_shared_one():
    x = np.ones(5)

    def fresh():
        g = x * 2.0
        out = support.finalize(g, x)
        return out is g

    def shared():
        g = x * 2.0
        h = g
        out = support.finalize(g, x)
        return out is not h and np.array_equal(out, h)

    assert fresh() and shared()
    view = (x * 2.0)[:]
    assert support.finalize(view, x) is not view
    assert support.finalize(np.ones(5, np.float32), x).dtype == np.float64
