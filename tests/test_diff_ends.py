"""np.diff with a differentiated prepend/append, in both modes.

The gradient crashed ('not enough values to unpack': the rule returned only the
array's cotangent) and the JVP was silently wrong (the tangent rule read the
ends as constants).  Checked against central differences.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def ends_keyword(x, b):
    return np.sum(np.diff(x, prepend=b) ** 3 * np.arange(1, x.shape[-1] + 1))


def ends_both(x, b):
    d = np.diff(x, 1, -1, b, b * 2.0)
    return np.sum(d**3 * np.arange(1, d.shape[-1] + 1))


def ends_arrays(x, b):
    # prepend rows of b, append a scalar drawn from b, second differences along 0
    return np.sum(np.sin(np.diff(x, 2, 0, b[:2], b[0, 0])))


def ends_only(x, b):
    # the differenced array is a constant: only the end carries derivatives (as
    # a keyword, append= of a constant array is refused with a hint to this form)
    return np.sum(np.diff(np.ones(3), 1, -1, 0.5, b) ** 2) + 0.0 * np.sum(x)


CASES = [
    (ends_keyword, (4,), ()),
    (ends_keyword, (2, 5), ()),
    (ends_keyword, (2, 5), (2, 1)),
    (ends_both, (4,), ()),
    (ends_both, (3, 4), (3, 1)),
    (ends_arrays, (4, 3), (3, 3)),
    (ends_arrays, (3, 2), (2, 2)),
    (ends_only, (3,), (2,)),
]


@pytest.mark.parametrize("f, xshape, bshape", CASES)
def test_diff_ends(f, xshape, bshape):
    rng = np.random.default_rng(len(xshape) + len(bshape))
    x, b = rng.standard_normal(xshape), rng.standard_normal(bshape)
    if not bshape:
        b = float(b)
    v, w = rng.standard_normal(xshape), rng.standard_normal(bshape)
    if not bshape:
        w = float(w)
    h = 1e-6
    expected = (f(x + h * v, b + h * w) - f(x - h * v, b - h * w)) / (2 * h)
    for _ in range(2):
        _, tangent = s2sad.jvp(f, argnums=(0, 1))(x, b, (v, w))
        np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8)
        got = s2sad.grad(f, argnums=(0, 1))(x, b)
        for g, e in zip(got, numerical_grad(f, [x, b], (0, 1))):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
