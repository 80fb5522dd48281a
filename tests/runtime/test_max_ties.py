"""max/min's cotangent written into a buffer (``d_max(..., into=)``).

Ties are counted by :func:`reductions.count_ones` (``np.einsum`` on larger
float arrays): the counts, and so the cotangents, must be exactly those of the
plain reduction; the gradients must match central differences.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import s2sad
from s2sad.runtime import reductions as red

RNG = np.random.default_rng(16)

AXES = [None, 0, 1, -1, 2, (0, 2), (1, 2), (0, 1, 2), ()]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 4, 5), (16, 9, 40), (64, 16, 8)])
@pytest.mark.parametrize("axis", AXES, ids=str)
def test_count_ones_equals_sum(axis, shape, dtype):
    mask = (RNG.random(shape) < 0.4).astype(dtype)
    want = np.sum(mask, axis=axis, keepdims=True)
    got = red.count_ones(mask, axis)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, mask)


def old_max_into(g, x, full, axis, keepdims):
    """The kernel before count_ones: np.sum counts the ties."""
    buf = np.equal(x, full).astype(x.dtype)
    ties = np.maximum(np.sum(buf, axis=axis, keepdims=True), 1)
    gx = red.expand(g, x, axis, keepdims)
    if np.shape(gx) == ties.shape:
        np.divide(gx, ties, out=ties)
    else:
        ties = gx / ties
    return buf * ties


def inputs(kind, shape, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    if kind == "ties":
        x = np.maximum(np.round(x), 0)  # many zeros and small integers
    if kind == "nan":
        x.ravel()[::37] = np.nan
    return x


@pytest.mark.parametrize("fn", [np.max, np.min, np.nanmax, np.nanmin])
@pytest.mark.parametrize("kind", ["distinct", "ties", "nan"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [2, (1, 3), None, -1], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_into_equals_the_plain_kernel(fn, kind, dtype, axis, keepdims):
    x = inputs(kind, (8, 16, 8, 8), dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slices
        ans = fn(x, axis=axis, keepdims=keepdims)
    buf = np.full(x.shape, np.nan, dtype)
    for scale in [1.0, -3.0]:  # the buffer reused, a second cotangent
        g = (scale * RNG.standard_normal(np.shape(ans))).astype(dtype)
        if np.ndim(g):
            g.ravel()[:2] = [np.inf, np.nan][: g.size]  # 0 * inf: NaN, as before
        full = red.expand(ans, x, axis, keepdims)
        with np.errstate(invalid="ignore"):  # 0 * inf
            want = old_max_into(g, x, full, axis, keepdims)
            got = red.d_max(g, ans, x, axis=axis, keepdims=keepdims, into=(buf,))[0]
        assert got is buf
        np.testing.assert_array_equal(got, want)


def test_ties_share_equally():
    x = np.zeros((4, 8, 64))
    x[:, :3, :] = 1.0  # three-way ties on every output
    x[0, 5, 0] = 2.0  # one winner
    g = RNG.standard_normal((4, 64))
    got = red.d_max(g, x.max(axis=1), x, axis=1, into=(np.empty_like(x),))[0]
    want = np.where(x == x.max(axis=1, keepdims=True), 1.0, 0.0)
    want[:, :3, :] /= 3
    want[0, :, 0] = [0, 0, 0, 0, 0, 1, 0, 0]
    np.testing.assert_allclose(got, want * g[:, None, :], rtol=1e-15)


def pool_loss(h, w):
    pooled = np.maximum(h, 0.0).reshape(8, 16, 8, 4).max(axis=2)
    return np.sum(np.tanh(pooled.reshape(8, -1) @ w)) + np.min(h, axis=(0, 2)).sum()


def test_value_and_grad_against_finite_differences():
    """The compiled max-pool, with workspaces (the second call reuses them)."""
    grad = s2sad.value_and_grad(pool_loss, argnums=(0, 1))
    for _ in range(2):
        h = (
            RNG.permutation(8 * 128 * 4).reshape(8, 128, 4) / 500.0 - 0.999
        )  # distinct, none 0
        w = RNG.standard_normal((64, 3))
        value, (gh, gw) = grad(h, w)
        assert np.isclose(value, pool_loss(h, w))
        vh, vw = RNG.standard_normal(h.shape), RNG.standard_normal(w.shape)
        eps = 1e-7
        fd = (
            pool_loss(h + eps * vh, w + eps * vw)
            - pool_loss(h - eps * vh, w - eps * vw)
        ) / (2 * eps)
        assert np.isclose(np.sum(gh * vh) + np.sum(gw * vw), fd, rtol=1e-6, atol=1e-8)


def test_hessian_vector_product():
    """Second order through the max-pool: H v against differences of gradients."""
    h = RNG.permutation(8 * 128 * 4).reshape(8, 128, 4) / 500.0 - 0.999
    w = RNG.standard_normal((64, 3))
    grad = s2sad.grad(pool_loss, argnums=0)
    hvp = s2sad.hvp(pool_loss, argnums=0)
    v = RNG.standard_normal(h.shape)
    eps = 1e-6
    want = (grad(h + eps * v, w) - grad(h - eps * v, w)) / (2 * eps)
    for _ in range(2):
        np.testing.assert_allclose(hvp(h, w, v), want, rtol=1e-5, atol=1e-7)
