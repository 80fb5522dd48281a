"""A ufunc's own keywords: ``casting=``, ``order=``, ``subok=`` and ``dtype=``.

The rules take none of them: the gradient crashed with a TypeError in the
backward pass (``d_exp() got an unexpected keyword argument 'dtype'``).  The
neutral ones are dropped, and ``dtype=D`` is read as the inputs cast to D
(front/outarg.py), so an integer D has the zero derivative of that cast.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def neutral(x, y):
    return (
        np.sum(np.add(x, y, casting="same_kind") ** 2)
        + np.sum(np.tanh(x, order="C") * y)
        + np.sum(np.maximum(x, y, subok=True))
    )


def float_dtype(x, y):
    return np.sum(np.exp(x, dtype=np.float64) * y) + np.sum(
        np.power(x, 2, dtype=float) + np.multiply(x, y, dtype=np.float64)
    )


def int_dtype(x, y):
    # the loop runs on the inputs cast to integers: piecewise constant
    return np.sum(x * np.add(x, y, dtype=int, casting="unsafe")) + np.sum(
        y * np.multiply(x, 1.0, dtype=np.int64, casting="unsafe")
    )


@pytest.mark.parametrize("f", [neutral, float_dtype, int_dtype])
@pytest.mark.parametrize("shape", [(4,), (2, 3)])
def test_ufunc_keywords(f, shape):
    rng = np.random.default_rng(len(shape))
    # k + 0.3: central differences stay off the integer steps
    x = rng.integers(-2, 3, shape) + 0.3
    y = rng.integers(-2, 3, shape) + 0.4
    v, w = rng.standard_normal(shape), rng.standard_normal(shape)
    expected = numerical_grad(f, [x, y], (0, 1))
    for _ in range(2):
        got = s2sad.grad(f, argnums=(0, 1))(x, y)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
        _, t = s2sad.jvp(f, argnums=(0, 1))(x, y, (v, w))
        fd = np.sum(expected[0] * v) + np.sum(expected[1] * w)
        np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-8)
