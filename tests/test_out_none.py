"""``out=None`` (NumPy's default: the result is a new array) on a NumPy call or
an array method: the gradient refused it as an out= write of differentiated
values, and, past that, the rules took no ``out`` keyword (a TypeError in the
backward pass).  The keyword is dropped (front/outarg.py), and so is a ufunc's
``out`` given by position (``np.add(x, y, None)``)."""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def defaults(x, y):
    return (
        np.sum(np.multiply(x, y, out=None) ** 2)
        + np.sum(np.tanh(x, out=None))
        + x.sum(out=None) * np.mean(y, out=None)
        + np.sum(np.cumsum(x, axis=-1, out=None) * y)
        + np.sum(np.add(x, y * 2.0, None) ** 2)  # out by position
        + np.sum(np.sin(y, None) * x)
    )


@pytest.mark.parametrize("shape", [(3,), (2, 4)])
def test_out_none(shape):
    rng = np.random.default_rng(len(shape))
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    v, w = rng.standard_normal(shape), rng.standard_normal(shape)
    for _ in range(2):
        got = s2sad.grad(defaults, argnums=(0, 1))(x, y)
        for g, e in zip(got, numerical_grad(defaults, [x, y], (0, 1))):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
        h = 1e-6
        fd = (defaults(x + h * v, y + h * w) - defaults(x - h * v, y - h * w)) / (2 * h)
        _, t = s2sad.jvp(defaults, argnums=(0, 1))(x, y, (v, w))
        np.testing.assert_allclose(t, fd, rtol=1e-6)
