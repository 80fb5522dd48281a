"""Primals that are linear plus a constant (``np.sum(x, initial=c)``, padding
with fill values): the constant has no derivative.

Forward mode pushed a tangent through such a primal with the constant still in
it (``np.sum(t, initial=c)``), so the tangent was off by ``c``: silent wrong
JVPs, found by comparing ``s2sad.jvp`` with central differences.
"""

import numpy as np
import pytest

import s2sad
import s2sad.errors
from s2sad.testing import numerical_grad

SHAPES = [(4,), (3, 4), (2, 3, 2)]


def _check(f, x, seed=0):
    """grad and jvp of scalar f at x against central differences (float64)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(x.shape)
    h = 1e-6
    expected = (f(x + h * v) - f(x - h * v)) / (2 * h)
    for _ in range(2):  # the first call compiles, the second reuses
        value, tangent = s2sad.jvp(f)(x, v)
        np.testing.assert_allclose(value, f(x), rtol=1e-12)
        np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(
            s2sad.grad(f)(x), numerical_grad(f, [x]), rtol=1e-6, atol=1e-8
        )


def sum_initial(x):
    return np.sum(x, initial=3.0) ** 2


def sum_initial_axis(x):
    return np.sum(np.sum(x, axis=0, initial=-1.5) ** 2)


def sum_initial_method(x):
    return np.sum(x.sum(0, None, None, False, 2.5) ** 2)


def sum_initial_positional(x):
    return np.sum(x, None, None, None, False, 0.75) ** 3


def nansum_initial(x):
    y = np.where(x > 1.0, np.nan, x)
    return np.nansum(y, initial=2.0) ** 2 + np.sum(
        np.nansum(y, 0, None, None, True, 1.0) ** 2
    )


SUMS = [
    sum_initial,
    sum_initial_axis,
    sum_initial_method,
    sum_initial_positional,
    nansum_initial,
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("f", SUMS)
def test_sum_initial(f, shape):
    x = np.random.default_rng(len(shape)).standard_normal(shape)
    _check(f, x)


def sum_from(x, b):
    # a differentiated initial goes in positionally (as a keyword it is refused)
    return np.sum(x, None, None, None, False, b[0]) ** 2 + np.sum(
        np.sum(x, 0, None, None, False, b[1]) ** 2
    )


def pad_ramp(x):
    return np.sum(np.pad(x, 2, mode="linear_ramp", end_values=1.5) ** 2)


def pad_ramp_pairs(x):
    ends = [(1.0, -2.0)] * x.ndim
    return np.sum(np.pad(x, [(1, 2)] * x.ndim, "linear_ramp", end_values=ends) ** 3)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("f", [pad_ramp, pad_ramp_pairs])
def test_pad_linear_ramp_tangent(f, shape):
    x = np.random.default_rng(3).standard_normal(shape)
    v = np.random.default_rng(4).standard_normal(shape)
    h = 1e-6
    expected = (f(x + h * v) - f(x - h * v)) / (2 * h)
    np.testing.assert_allclose(s2sad.jvp(f)(x, v)[1], expected, rtol=1e-6)


def pad_maximum(x):
    return np.sum(np.pad(x, 2, mode="maximum") ** 2)


def pad_median(x):
    return np.sum(np.pad(x, (1, 2), "median", stat_length=2) ** 2)


@pytest.mark.parametrize("f", [pad_maximum, pad_median])
def test_pad_statistic_tangent_refused(f):
    # the padded entry is one of x's, picked by value: pad(t, 'maximum') would be
    # the maximum of the tangent, a silently wrong JVP
    x = np.array([0.3, -1.2, 0.8, 1.1])
    with pytest.raises(NotImplementedError, match="has no tangent rule") as info:
        s2sad.jvp(f)(x, np.ones(4))
    assert "test_constant_terms.py" in "".join(getattr(info.value, "__notes__", []))


def prod_from(x, b):
    return np.prod(x, None, None, None, False, b[0]) + np.sum(
        np.prod(x, 0, None, None, False, b[1]) ** 2
    )


def max_from(x, b):
    # b[0] + 5 wins the whole maximum, b[1] - 5 wins none of the minima
    return (
        np.max(x, None, None, False, b[0] + 5.0) * 2.0
        + np.sum(np.min(x, 0, None, False, b[1] - 5.0) ** 2)
        + np.max(x, None, None, False, b[1] - 5.0)
    )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("f", [prod_from, max_from])
def test_reduction_differentiated_initial(f, shape):
    # the gradient crashed (d_max took no initial; d_prod returned no cotangent
    # for it); forward mode pushes only the reduced array's tangent, so it
    # refuses where it dropped the initial's tangent silently
    rng = np.random.default_rng(11)
    x, b = rng.uniform(0.5, 1.5, shape), rng.standard_normal(2)
    got = s2sad.grad(f, argnums=(0, 1))(x, b)
    for g, e in zip(got, numerical_grad(f, [x, b], (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
    with pytest.raises(
        s2sad.errors.MissingRuleError,
        match="argument 6 of numpy.prod|argument 5 of numpy",
    ):
        s2sad.jvp(f, argnums=(0, 1))(x, b, (x, b))


def nan_to_num_from(x, b):
    y = np.where(x > 1.0, np.inf, np.where(x < -1.0, -np.inf, x))
    y = np.where(np.abs(x) < 0.2, np.nan, y)
    return np.sum(np.nan_to_num(y, True, b[0], b[1] + 10.0, b[2] - 10.0) ** 2)


@pytest.mark.parametrize("shape", SHAPES)
def test_nan_to_num_differentiated_fill(shape):
    # the fill values got no cotangent and no tangent: silently zero
    rng = np.random.default_rng(5)
    x, b = 1.5 * rng.standard_normal(shape), rng.standard_normal(3)
    x.flat[:3] = [1.7, -1.4, 0.1]  # one of each: +inf, -inf, nan
    v, w = rng.standard_normal(shape), rng.standard_normal(3)
    h = 1e-6
    expected = (
        nan_to_num_from(x + h * v, b + h * w) - nan_to_num_from(x - h * v, b - h * w)
    ) / (2 * h)
    _, tangent = s2sad.jvp(nan_to_num_from, argnums=(0, 1))(x, b, (v, w))
    np.testing.assert_allclose(tangent, expected, rtol=1e-6)
    got = s2sad.grad(nan_to_num_from, argnums=(0, 1))(x, b)
    for g, e in zip(got, numerical_grad(nan_to_num_from, [x, b], (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def nansum_from(x, b):
    y = np.where(x > 1.0, np.nan, x)
    return np.nansum(y, None, None, None, False, b[0]) ** 2 + np.sum(
        np.nansum(y, 0, None, None, False, b[1]) ** 2
    )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("f", [sum_from, nansum_from])
def test_sums_differentiated_initial(f, shape):
    rng = np.random.default_rng(9)
    x, b = rng.standard_normal(shape), rng.standard_normal(2)
    v, w = rng.standard_normal(shape), rng.standard_normal(2)
    h = 1e-6
    expected = (f(x + h * v, b + h * w) - f(x - h * v, b - h * w)) / (2 * h)
    _, tangent = s2sad.jvp(f, argnums=(0, 1))(x, b, (v, w))
    np.testing.assert_allclose(tangent, expected, rtol=1e-6)
    got = s2sad.grad(f, argnums=(0, 1))(x, b)
    for g, e in zip(got, numerical_grad(f, [x, b], (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
