"""Float32 classes and reductions that keep their dims (reverse/likes.py):
``unbroadcast`` between float32 values of one shape is dropped, kept where a
float64 scalar or array, an int array or a broadcast could change the shape or
dtype; values and gradients as the unoptimised compile gives them, bit for bit,
and against finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.testing import numerical_grad
from s2sad.transforms.reverse import likes


def after(fn, example_args=(), argnums=(0,)) -> str:
    out: list[str] = []
    pipeline.compile_function(
        fn, argnums, None, example_args, dump_after="reverse", dump=out.append
    )
    return "\n".join(out)


def head(W, b, x, y):
    """A softmax head as published code writes it (max shift, log-softmax, picks)."""
    z = np.tanh(x @ W) + b
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(x.shape[0]), y])


def centred(x, c):
    """Each row's mean taken off, scaled by ``c`` (a number of some type)."""
    u = x - np.mean(x, axis=1, keepdims=True)
    v = np.maximum(u * c, -2.0)
    return np.sum(v * v)


def two_axes(x):
    """Reductions along two axes: their sum has x's shape, neither alone."""
    a = x.max(axis=0, keepdims=True)
    b = x.max(axis=1, keepdims=True)
    s = a + b
    return np.sum(np.sin(s) * x)


def looped(x, w):
    acc = 0.0
    for _ in range(3):
        u = np.exp(x * w - x.max(axis=-1, keepdims=True))
        acc = acc + np.sum(u * u)
    return acc


def helper(u):
    return u - u.sum(axis=1, keepdims=True) * 0.5


def with_callee(x):
    return np.sum(np.cos(helper(x)))


def _head_args(rng, dtype, n=5, k=4, m=3):
    return (
        (0.5 * rng.normal(size=(m, k))).astype(dtype),
        (0.1 * rng.normal(size=k)).astype(dtype),
        rng.normal(size=(n, m)).astype(dtype),
        rng.integers(0, k, size=n),
    )


def test_float32_same_shape_loses_unbroadcast():
    code = after(head, _head_args(np.random.default_rng(0), np.float32), (0, 1))
    assert "g_z = g_z_1" in code and "unbroadcast(g_z_1, z)" not in code
    assert "g_b = unbroadcast(g_z, b)" in code  # the bias: summed
    assert "g_tanh = unbroadcast(g_z, tanh)" in code  # not proven alike
    code = after(centred, (np.ones((3, 4), np.float32), 0.5))
    assert "g_x = g_u\n" in code  # x - mean(x, keepdims): x's shape, float32
    assert "g_mean = unbroadcast(-g_u, mean)" in code
    # a float32 product's cotangent may be a double (np.where(..., 0.0, c)): cast
    assert "g_u = unbroadcast(" in code
    code = after(centred, (np.ones((3, 4)), 0.5))
    assert "g_u = g_mul * np.where(" in code  # float64: nothing to cast


@pytest.mark.parametrize(
    "c",
    [np.float64(0.5), np.ones(4), np.ones((3, 4), np.int64)],
    ids=["float64-scalar", "float64-array", "int-array"],
)
def test_promoting_operands_keep_unbroadcast(c):
    code = after(centred, (np.ones((3, 4), np.float32), c))
    assert "g_u = unbroadcast(" in code  # u * c: float64 (or a broadcast)
    assert "g_x = g_u\n" in code  # x - mean(x, keepdims): float32 still


def test_reductions_along_other_axes_are_not_alike():
    code = after(two_axes, (np.ones((3, 4), np.float32),))
    assert "unbroadcast(g_s, a)" in code and "unbroadcast(g_s, b)" in code


def test_classes_follow_nep50():
    import ast

    from s2sad.transforms.astutil import anno

    fn = ast.parse("def f(x, c):\n    y = x * c\n    z = x * 2.0\n    return y\n")
    f = fn.body[0]
    for n in ast.walk(f):
        anno(n)
    x32 = np.ones(3, np.float32)
    got = likes.classes(f, {"x": x32, "c": np.float64(2.0)})
    assert got["y"] == ("x", likes.F64) and got["z"] == ("x", likes.F32)
    got = likes.classes(f, {"x": x32, "c": np.float32(2.0)})
    assert got["y"] == ("x", likes.F32)
    got = likes.classes(f, {"x": x32, "c": 2.0})
    assert got["y"] == ("x", likes.F32)
    got = likes.classes(f, {"x": x32, "c": np.ones(3, np.float16)})
    assert "y" not in got  # float16: no class
    got = likes.classes(f, {"x": x32.astype(np.int32), "c": 2.0})
    assert "y" not in got and "z" not in got


CASES = [
    (head, lambda r, dt: _head_args(r, dt), (0, 1)),
    (head, lambda r, dt: _head_args(r, dt, n=64, k=10, m=48), (0, 1)),  # buffers
    (centred, lambda r, dt: (r.normal(size=(3, 4)).astype(dt), 0.7), (0,)),
    (centred, lambda r, dt: (r.normal(size=(40, 30)).astype(dt), dt(0.7)), (0,)),
    (centred, lambda r, dt: (r.normal(size=(3, 4)).astype(dt), r.normal(size=4)), (0,)),
    (two_axes, lambda r, dt: (r.normal(size=(3, 4)).astype(dt),), (0,)),
    (looped, lambda r, dt: (r.normal(size=(2, 5)).astype(dt), dt(0.3)), (0, 1)),
    (looped, lambda r, dt: (r.normal(size=(60, 50)).astype(dt), dt(0.3)), (0, 1)),
    (with_callee, lambda r, dt: (r.normal(size=(3, 4)).astype(dt),), (0,)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn,make,argnums", CASES)
def test_values_and_gradients_as_unoptimised_twice(fn, make, argnums, dtype):
    rng = np.random.default_rng(7)
    vg = s2sad.value_and_grad(fn, argnums=argnums)
    plain = s2sad.value_and_grad(fn, argnums=argnums, optimize=False)
    for _ in range(2):  # workspaces are reused on the second call
        args = make(rng, dtype)
        value, grads = vg(*args)
        want_value, want_grads = plain(*args)
        assert value == want_value and type(value) is type(want_value)
        for i, g, w in zip(argnums, grads, want_grads):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            assert np.shape(g) == np.shape(args[i])
            np.testing.assert_array_equal(g, w)
        if dtype == np.float64:
            nums = numerical_grad(fn, list(args), argnums)
            for g, num in zip(grads, nums):
                np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-7)


def test_second_order_and_forward_through_the_dropped_calls():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4))
    v = rng.normal(size=(3, 4))
    g = s2sad.grad(with_callee)
    eps = 1e-6
    want = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
    np.testing.assert_allclose(s2sad.hvp(with_callee)(x, v), want, rtol=1e-5)
    _, t = s2sad.jvp(centred, (x, 0.7), (v, 0.0))
    num = (centred(x + eps * v, 0.7) - centred(x - eps * v, 0.7)) / (2 * eps)
    np.testing.assert_allclose(t, num, rtol=1e-5)
