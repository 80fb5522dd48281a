"""support.sum_rows: a bias's cotangent summed over many narrow rows in two
steps (blocks side by side, then the block sums); the same sum as NumPy's to
rounding, in the dtype of the cotangent, into ``out`` when given."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime.support import sum_rows, unbroadcast
from s2sad.testing import numerical_grad


@pytest.mark.parametrize("n", [1, 7, 511, 512, 513, 1000, 4096, 8193])
@pytest.mark.parametrize("k", [1, 3, 8, 16, 17])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_rows_matches_numpy(n, k, dtype):
    g = np.random.default_rng(n * 31 + k).standard_normal((n, k)).astype(dtype)
    exact = g.astype(np.longdouble).sum(axis=0)
    got = sum_rows(g)
    out = np.full(k, np.nan, dtype)
    into = sum_rows(g, out)
    assert got.dtype == dtype and into is out
    tol = 2e-5 * np.sqrt(n) if dtype == np.float32 else 1e-13 * np.sqrt(n)
    np.testing.assert_allclose(got, exact, rtol=tol, atol=tol)
    np.testing.assert_allclose(out, got, rtol=0, atol=tol)


def test_sum_rows_keeps_nan_and_inf():
    g = np.ones((4096, 4))
    g[1000, 1] = np.nan
    g[3000, 2] = np.inf
    s = sum_rows(g)
    assert np.isnan(s[1]) and s[2] == np.inf and s[0] == s[3] == 4096.0


def test_sum_rows_of_a_strided_view_takes_numpys_way():
    g = np.random.default_rng(0).standard_normal((2048, 16))[:, ::2]
    np.testing.assert_allclose(sum_rows(g), g.sum(axis=0), rtol=1e-12)


@pytest.mark.parametrize("shape", [(64, 128, 8), (3, 700, 4), (1025, 2)])
def test_unbroadcast_to_a_trailing_bias(shape):
    g = np.random.default_rng(1).standard_normal(shape)
    like = np.zeros(shape[-1])
    out = np.empty_like(like)
    want = g.reshape(-1, shape[-1]).sum(axis=0)
    np.testing.assert_allclose(unbroadcast(g, like, out=out), want, rtol=1e-12)
    np.testing.assert_allclose(unbroadcast(g, like), want, rtol=1e-12)


def conv_bias(c, x, K):
    return np.sum(np.tanh(x @ K + c) ** 2)


@pytest.mark.parametrize("n", [64, 3])
def test_bias_gradient_through_a_batched_product(n):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((n, 130, 5)) * 0.3
    K = rng.standard_normal((5, 8)) * 0.3
    c = rng.standard_normal(8) * 0.1
    g = s2sad.grad(conv_bias)
    want = numerical_grad(conv_bias, (c, x, K))
    for _ in range(2):  # buffered calls reuse the workspace
        np.testing.assert_allclose(g(c, x, K), want, rtol=1e-6, atol=1e-8)
