"""The ``methods`` pass: NumPy reductions of NumPy values as methods
(s2sad/transforms/buffers/methods.py), source in and source out, and the
gradients and values it leaves unchanged (finite differences, exact values)."""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.options import Options
from s2sad.testing import numerical_grad


def after(pass_name: str, fn, example_args: tuple = (), options=None) -> str:
    out: list[str] = []
    pipeline.compile_function(
        fn, (0,), options, example_args, dump_after=pass_name, dump=out.append
    )
    return "\n".join(out)


def lse(x):
    m = np.max(x)
    return m + np.log(np.sum(np.exp(x - m)))


def axes(x):
    e = np.exp(x)
    s = np.sum(e, 1)
    t = np.mean(e * e, axis=0, keepdims=True)
    return np.sum(s * s) + np.max(t) - np.min(e) + np.prod(np.tanh(e) + 1.5)


def mixed(x, n):
    v = [x, x]
    if n > 1:
        w = np.tanh(x)
    else:
        w = v
    return np.sum(w) + np.sum(np.sum(v, axis=0))


def test_a_reduction_of_a_numpy_value_becomes_its_method():
    before, code = after("scalar", lse, (np.ones(4),)), after(
        "methods", lse, (np.ones(4),)
    )
    assert "sum_1 = np.sum(exp)" in before
    assert "sum_1 = exp.sum()" in code
    # an array argument (the cache key tells arrays apart): its method too
    assert "m = x.max()" in code
    # without a call's values, or given a list or a float, the function stays
    assert "m = np.max(x)" in after("methods", lse)
    assert "m = np.max(x)" in after("methods", lse, ([1.0, 2.0],))


def rebound(x, y):
    for _ in range(2):
        x = x * 2.0
    return np.max(x) + np.max(y) + np.sum(np.exp(y))


def test_array_arguments_bound_again_keep_the_function():
    code = after("methods", rebound, (np.ones(3), np.ones(3)))
    assert "np.max(x)" in code  # bound again in the function
    assert "y.max()" in code
    value, g = s2sad.value_and_grad(rebound)(np.arange(3.0), np.ones(3))
    assert value == rebound(np.arange(3.0), np.ones(3))
    np.testing.assert_allclose(g, [0.0, 0.0, 4.0])
    # the module compiled for an array is not used for a list or a float
    vg = s2sad.value_and_grad(lse)
    for x in (np.array([0.5, 1.0]), [0.5, 1.0], 0.5, np.array([0.5, 1.0])):
        value, g = vg(x)
        assert value == lse(np.asarray(x))
        np.testing.assert_allclose(g, numerical_grad(lse, [x]), rtol=1e-6)


def test_arguments_keep_their_order_and_keywords():
    code = after("methods", axes, (np.ones((3, 4)),))
    assert "s = e.sum(1)" in code
    assert "t = mul.mean(axis=0, keepdims=True)" in code
    forward = code.split("# grad of")[0]
    assert "max_1 = t.max()" in forward and "min_1 = e.min()" in forward
    assert "prod = add_1.prod()" in forward and "np." not in forward.replace(
        "np.exp(x)", ""
    ).replace("np.tanh(e)", "")


def test_names_that_may_hold_something_else_keep_the_function():
    code = after("methods", mixed, (np.ones(3), 2))
    assert "np.sum(w)" in code  # w may be a list
    assert "np.sum(v, axis=0)" in code


def test_buffer_sites_scalar_code_and_the_plain_form_are_left_alone():
    code = after("methods", axes, (np.ones((300, 400)),))  # buffered
    assert "t = np.mean(mul, axis=0, keepdims=True, out=ws['t'])" in code
    assert "s = e.sum(1)" in code
    assert "np.sum(" not in after("methods", lse, (np.ones(3),)).split("grad of")[0]
    plain = Options(optimize=False)
    assert "np.sum(exp)" in after("methods", lse, (np.ones(3),), plain)

    def scalar_sum(x):
        return np.sum(np.exp(x)) * x

    assert "np.sum(" in after("methods", scalar_sum, (0.5,))
    assert s2sad.grad(scalar_sum)(0.5) == pytest.approx(np.exp(0.5) * 1.5)


@pytest.mark.parametrize("fn,shape", [(lse, (7,)), (lse, (2, 3)), (axes, (3, 4))])
def test_values_and_gradients_unchanged(fn, shape):
    rng = np.random.default_rng(7)
    vg = s2sad.value_and_grad(fn)
    plain = s2sad.value_and_grad(fn, optimize=False)
    for _ in range(3):
        x = 0.5 * rng.normal(size=shape)
        value, g = vg(x)
        assert value == fn(x)  # the same reductions, bit for bit
        assert value == plain(x)[0]
        np.testing.assert_allclose(g, numerical_grad(fn, [x]), rtol=1e-6, atol=1e-8)


def test_mixed_bindings_gradient():
    x = np.array([0.3, -0.2, 0.9])
    for n in (1, 2):
        g = s2sad.grad(mixed)(x, n)
        np.testing.assert_allclose(g, numerical_grad(mixed, [x, n]), rtol=1e-6)


def test_logsumexp_edge_values_unchanged():
    vg = s2sad.value_and_grad(lse)
    with np.errstate(all="ignore"):
        for x in (
            np.array([-np.inf, -np.inf]),
            np.array([np.inf, 1.0]),
            np.array([np.nan, 0.0]),
            np.array([1e308, 1e308]),
        ):
            value, g = vg(x)
            np.testing.assert_array_equal(value, lse(x))
            _, want = s2sad.value_and_grad(lse, optimize=False)(x)
            np.testing.assert_array_equal(g, want)


def mean_loss(x, y):
    d = x * y - 1.0
    return np.mean(d * d) + np.mean(x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_float64_mean_is_sum_over_size(dtype):
    x = np.array([0.3, -1.2, 2.5, 0.7], dtype)
    y = np.array([1.5, 0.5, -0.25, 2.0], dtype)
    code = after("methods", mean_loss, (x, y))
    if dtype == np.float64:
        assert "mean = mul_1.sum() / mul_1.size" in code
        assert "mean_1 = x.sum() / x.size" in code
    else:  # float32 (and anything not proven float64): the method
        assert "mean = mul_1.mean()" in code and "/ mul_1.size" not in code
    vg = s2sad.value_and_grad(mean_loss)
    plain = s2sad.value_and_grad(mean_loss, optimize=False)
    for _ in range(2):
        value, g = vg(x, y)
        want_value, want_g = plain(x, y)
        assert value == want_value and type(value) is type(want_value)
        np.testing.assert_array_equal(g, want_g)
        assert g.dtype == dtype
    if dtype == np.float64:
        np.testing.assert_allclose(g, numerical_grad(mean_loss, [x, y]), rtol=1e-6)
