"""np.average(..., returned=True): the average and the sum of the weights.

The gradient raised NotImplementedError, and forward mode was silently wrong
once both arguments had tangents (the two contributions, tuples, were joined
with ``+``: concatenated).  Checked against central differences in both modes.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def flat(x, w):
    a, s = np.average(x, None, w, True)
    return a * s + np.sin(a)


def along_axis(x, w):
    a, s = np.average(x, 0, w, True)
    return np.sum(a**2) + np.sum(s * a) + np.sum(np.cos(s))


def keyword(x, w):
    a, s = np.average(x, weights=w, returned=True)
    return a * s


def unweighted(x, w):
    a, s = np.average(x, 1, None, True)
    return np.sum(a * s) + np.sum(w * x[:, :1].T)


def sum_only(x, w):
    return np.sum(np.average(x, 0, w, True)[1] ** 2) + np.sum(x)


CASES = [
    (flat, (5,), (5,)),
    (flat, (2, 3), (2, 3)),
    (along_axis, (3, 2), (3,)),
    (along_axis, (3, 2), (3, 2)),
    (along_axis, (4, 2, 2), (4,)),
    (keyword, (5,), (5,)),
    (unweighted, (3, 2), (1, 3)),
    (sum_only, (3, 4), (3,)),
]


@pytest.mark.parametrize("f, xshape, wshape", CASES)
def test_average_returned(f, xshape, wshape):
    rng = np.random.default_rng(len(xshape) + len(wshape))
    x, w = rng.standard_normal(xshape), rng.uniform(0.5, 2.0, wshape)
    v, u = rng.standard_normal(xshape), rng.standard_normal(wshape)
    h = 1e-6
    expected = (f(x + h * v, w + h * u) - f(x - h * v, w - h * u)) / (2 * h)
    for _ in range(2):
        _, tangent = s2sad.jvp(f, argnums=(0, 1))(x, w, (v, u))
        np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8)
        got = s2sad.grad(f, argnums=(0, 1))(x, w)
        for g, e in zip(got, numerical_grad(f, [x, w], (0, 1))):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
