"""Max and min along an axis known not to be the last, or along the last
(s2sad/transforms/buffers/along.py, run by the ``methods`` pass): the emitted form, where it is left
alone, and the gradients (central differences in float64, workspaces reused),
forward mode and second order of a max-pool."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.testing import numerical_grad


def after(fn, example_args: tuple) -> str:
    out: list[str] = []
    pipeline.compile_function(
        fn, (0,), None, example_args, dump_after="methods", dump=out.append
    )
    return "\n".join(out)


def pool(h, w):
    n, L, f = h.shape
    pooled = np.tanh(h).reshape(n, L // 4, 4, f).max(axis=2)
    return np.sum(pooled.reshape(n, -1) * w)


def pool_min(h, w):
    n, L, f = h.shape
    r = (h * h).reshape(n, L // 2, 2, f)
    return np.sum(np.min(r, 1, keepdims=True) * w) + np.sum(np.max(r, axis=-2) ** 2)


def last_axes(x, w):
    z = x @ w
    a = z.max(axis=1, keepdims=True)
    r = z.reshape(z.shape[0], 2, -1)
    k = 1
    return np.sum(a) + np.sum(r.max(axis=-1)) + np.sum(r.max(2)) + np.sum(r.min(k))


def kept(x):
    r = np.exp(x).reshape(4, 2, -1)
    return np.sum(r.max(axis=1, initial=-1.0)) + np.sum(
        r.min(axis=0, where=r > 0.5, initial=9.0)
    )


def looped(h, w):
    n, L, f = h.shape
    total = 0.0
    for k in range(2):
        r = (h * (k + 1.0)).reshape(n, L // 4, 4, f)
        total = total + np.sum(r.max(axis=2).reshape(n, -1) * w)
    return total + helper(h)


def helper(h):
    n, L, f = h.shape
    return np.sum(np.min(np.sin(h).reshape(n, 2, L // 2, f), axis=1) ** 2)


def data(n=3, L=8, f=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, L, f)), rng.normal(size=(n, L // 4 * f))


def test_a_pool_of_a_reshape_becomes_max_along():
    code = after(pool, data())
    assert "= max_along(reshape, 2)" in code
    assert "reshape.max(" not in code


def test_function_forms_negative_axes_and_keepdims():
    code = after(pool_min, (data(L=8)[0], 1.5))
    assert "min_along(r, 1, keepdims=True)" in code
    assert "max_along(r, -2)" in code


def test_last_axes_become_kernels_other_keywords_and_axes_are_left_alone():
    rng = np.random.default_rng(1)
    code = after(last_axes, (rng.normal(size=(3, 4)), rng.normal(size=(4, 6))))
    assert "max_along(z, 1, keepdims=True)" in code  # the last axis of a matrix
    assert "max_along(r, -1)" in code and "max_along(r, 2)" in code
    assert ".min(k)" in code  # not a literal axis
    code = after(kept, (rng.normal(size=(4, 6)),))
    assert "_along" not in code


def last_only(x, w):
    z = np.tanh(x @ w)
    return np.sum(z.max(axis=0)) + np.sum(np.min(z, axis=-1) ** 2)


def test_an_axis_of_unknown_rank_other_than_the_last_is_left_alone():
    rng = np.random.default_rng(5)
    code = after(last_only, (rng.normal(size=(3, 4)), rng.normal(size=(4, 6))))
    assert "z.max(axis=0)" in code and "min_along(z, -1)" in code


@pytest.mark.parametrize("n", [300, 3])
def test_a_last_axis_max_gradients_and_workspaces(n):
    rng = np.random.default_rng(n)
    x, w = rng.normal(size=(n, 8)), rng.normal(size=(8, 6))
    vg = s2sad.value_and_grad(last_only, argnums=(0, 1))
    for _ in range(3):  # first, recording, buffered calls
        value, got = vg(x, w)
        assert value == last_only(x, w)
        want = numerical_grad(last_only, [x, w], (0, 1))
        plain = s2sad.grad(last_only, argnums=(0, 1), optimize=False)(x, w)
        for g, e, p in zip(got, want, plain):
            assert np.linalg.norm(g - e) <= 1e-6 * np.linalg.norm(e)
            np.testing.assert_array_equal(g, p)
    assert "min_along(z, -1" in vg.source


@pytest.mark.parametrize("fn", [pool, pool_min, looped])
@pytest.mark.parametrize("shape", [(3, 8, 5), (1, 16, 1), (17, 8, 2)])
def test_gradients_match_finite_differences_with_workspaces(fn, shape):
    n, L, f = shape
    vg = s2sad.value_and_grad(fn)
    for seed in (0, 1):  # the second call reuses the workspace
        rng = np.random.default_rng(seed)
        h = rng.normal(size=shape)
        w = rng.normal(size=(n, L // 4 * f)) if fn is not pool_min else 1.5
        value, g = vg(h, w)
        assert value == pytest.approx(fn(h, w), rel=1e-12)
        np.testing.assert_allclose(g, numerical_grad(fn, [h, w]), rtol=1e-5, atol=1e-7)


def test_a_large_pool_takes_the_fast_kernel_with_the_same_gradient():
    rng = np.random.default_rng(2)
    h, w = rng.normal(size=(64, 32, 8)), rng.normal(size=(64, 64))
    vg = s2sad.value_and_grad(pool, argnums=(0, 1))
    for _ in range(2):
        value, (gh, gw) = vg(h, w)
        assert "= max_along(reshape, 2" in vg.source
        pooled = np.tanh(h).reshape(64, 8, 4, 8)
        want = pooled.max(axis=2)
        assert value == np.sum(want.reshape(64, -1) * w)
        mask = pooled == want[:, :, None, :]
        assert np.allclose(
            gh, (mask * w.reshape(64, 8, 1, 8)).reshape(h.shape) * (1 - np.tanh(h) ** 2)
        )
        np.testing.assert_array_equal(gw, want.reshape(64, -1))


def test_forward_mode_and_second_order():
    h, w = data()
    v = np.random.default_rng(3).normal(size=h.shape)
    out, t = s2sad.jvp(pool, (h, w), (v, np.zeros_like(w)))
    eps = 1e-6
    want = (pool(h + eps * v, w) - pool(h - eps * v, w)) / (2 * eps)
    assert out == pytest.approx(pool(h, w)) and t == pytest.approx(want, rel=1e-6)
    gfun = s2sad.grad(pool)
    hv = s2sad.hvp(pool)(h, w, v)
    fd = (gfun(h + eps * v, w) - gfun(h - eps * v, w)) / (2 * eps)
    np.testing.assert_allclose(hv, fd, rtol=1e-5, atol=1e-6)


def np_reshaped(x):
    r = np.reshape(np.cos(x), (2, 3, 4))
    return np.sum(np.max(r, axis=1) ** 2) + np.sum(r.min(axis=2))


def test_np_reshape_gives_the_rank_too():
    x = np.random.default_rng(4).normal(size=24)
    code = after(np_reshaped, (x,))
    assert "max_along(r, 1)" in code and "min_along(r, 2)" in code
    vg = s2sad.value_and_grad(np_reshaped)
    for _ in range(2):
        value, g = vg(x)
        assert value == np_reshaped(x)
        np.testing.assert_allclose(
            g, numerical_grad(np_reshaped, [x]), rtol=1e-6, atol=1e-8
        )
