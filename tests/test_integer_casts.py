"""Casts of a differentiated array to integers or booleans are piecewise
constant: zero derivative.

``x * x.astype(int)`` had gradient ``x + int(x)``, not ``int(x)``: the adjoint
of ``astype`` passed the cotangent through whatever the target dtype, and
``np.asarray(x, dtype=int)`` / ``np.array(x, dtype=...)`` did the same in both
modes (the tangent was t cast to int).  Float casts still carry the cotangent.
Checked against central differences away from the integer steps.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def astype_int(x):
    return np.sum(x * x.astype(int)) + np.sum(x.astype(np.int32) * 3.0)


def astype_bool(x):
    return np.sum(x**2 * x.astype(bool)) + np.sum(np.tanh(x).astype("int64"))


def asarray_int(x):
    return np.sum(x * np.asarray(x, dtype=int)) + np.sum(np.array(x, np.int32) ** 2)


def float_casts(x):
    # casts between floats carry the cotangent
    return np.sum(x * np.asarray(x, dtype=float)) + np.sum(np.array(x, np.float64) ** 3)


def scalar_types(x):
    # np.int64(...) and kin of a number, and a matrix's rank: piecewise constant
    # (each of a single entry: the points keep off the integer steps, sums may not)
    k = np.int64(x.ravel()[0]) + np.int32(np.max(x)) + np.uint8(np.abs(x).max())
    r = np.linalg.matrix_rank(x.reshape(x.shape[0], -1))
    return np.sum(x**2) * (k + 1) + np.sum(x) * r + np.sum(x) * np.bool_(np.min(x) > 0)


def _points(shape, seed):
    rng = np.random.default_rng(seed)
    # k + 0.3 or k + 0.7: central differences stay off the integer steps
    return rng.integers(-3, 3, shape) + rng.choice([0.3, 0.7], shape)


@pytest.mark.parametrize(
    "f", [astype_int, astype_bool, asarray_int, float_casts, scalar_types]
)
@pytest.mark.parametrize("shape", [(4,), (2, 3), (2, 1, 3)])
def test_casts(f, shape):
    x = _points(shape, len(shape))
    v = np.random.default_rng(0).standard_normal(shape)
    expected = numerical_grad(f, [x])
    for _ in range(2):
        np.testing.assert_allclose(s2sad.grad(f)(x), expected, rtol=1e-6, atol=1e-8)
        _, tangent = s2sad.jvp(f)(x, v)
        np.testing.assert_allclose(tangent, np.sum(expected * v), rtol=1e-6, atol=1e-8)


def sum_int(x):
    # np.sum(x, dtype=int) adds x cast to integers
    return np.sum(x, dtype=int) * np.sum(x**2) + np.sum(x * x.sum(0, int))


def mean_cumsum_int(x):
    return np.mean(x, dtype=np.int32) * np.sum(x) + np.sum(
        x * np.cumsum(x, axis=-1, dtype=np.int64)
    )


def prod_trace_int(x):
    m = x.reshape(x.shape[0], -1)
    return np.prod(x, dtype=int) * np.sum(x) + np.trace(m, dtype=int) * np.sum(x**2)


def float_dtypes(x):
    return np.sum(x**2, dtype=np.float64) + np.sum(np.cumsum(x, dtype=float) ** 2)


@pytest.mark.parametrize("f", [sum_int, mean_cumsum_int, prod_trace_int, float_dtypes])
@pytest.mark.parametrize("shape", [(4,), (2, 3), (3, 2, 2)])
def test_reductions_with_integer_dtype(f, shape):
    test_casts(f, shape)


def built_int(x):
    # arrays built from differentiated values with an integer dtype
    n = x.size
    flat = x.reshape(-1)
    return (
        np.sum(flat * np.full(n, flat[0], dtype=int))
        + np.sum(x * np.full_like(x, flat[1], dtype=int))
        + np.sum(flat * np.linspace(flat[0], flat[1] * 3.0, n, dtype=int))
        + np.sum(flat[:3] * np.arange(flat[2], flat[2] + 3.0, 1.0, int))
    )


def built_float(x):
    n = x.size
    flat = x.reshape(-1)
    return np.sum(flat * np.full(n, flat[0], dtype=float)) + np.sum(
        flat * np.linspace(flat[0], flat[1], n, dtype=np.float64)
    )


@pytest.mark.parametrize("f", [built_int, built_float])
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_built_with_integer_dtype(f, shape):
    test_casts(f, shape)
