"""Rules that return fewer cotangents than the call has arguments.

A rule gives no cotangent for arguments it reads as constants (np.linspace's
num).  With two differentiated arguments the gradient unpacked one cotangent per
argument and crashed ('not enough values to unpack'): np.linspace(b[0], b[1], 3).
The emitted call pads such a rule's tuple (transforms/inline.py shortest_return),
and unpacks a rule of unknown length (d_tensordot returns a helper's tuple) only
up to the last cotangent it wants: np.tensordot(x, y, 1) crashed the same way.
"""

import numpy as np
import pytest

import s2sad
from s2sad.testing import numerical_grad


def ends(x, b):
    return np.sum(np.linspace(b[0], b[1], x.shape[-1]) * x)


def ends_no_endpoint(x, b):
    return np.sum(np.sin(np.linspace(b[0], b[1] * 2.0, x.shape[-1], False) * x))


def ends_arrays(x, b):
    # vector ends: a (n, 2) grid along axis 0
    return np.sum(np.linspace(b, b * 3.0 + 1.0, x.shape[0]) * x[:, :2])


@pytest.mark.parametrize("f", [ends, ends_no_endpoint])
@pytest.mark.parametrize("shape", [(3,), (2, 4), (5,)])
def test_linspace_both_ends(f, shape):
    rng = np.random.default_rng(len(shape))
    x, b = rng.standard_normal(shape), rng.standard_normal(2)
    for _ in range(2):
        got = s2sad.grad(f, argnums=(0, 1))(x, b)
        for g, e in zip(got, numerical_grad(f, [x, b], (0, 1))):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("n", [2, 4])
def test_linspace_array_ends(n):
    rng = np.random.default_rng(n)
    x, b = rng.standard_normal((n, 3)), rng.standard_normal(2)
    got = s2sad.grad(ends_arrays, argnums=(0, 1))(x, b)
    for g, e in zip(got, numerical_grad(ends_arrays, [x, b], (0, 1))):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)


def tensordot_positional(x, y):
    # axes given positionally: three arguments, a rule returning two cotangents
    return np.sum(np.tensordot(x, y, 1) ** 2) + np.sum(
        np.tensordot(x, y.T, ([1], [1])) * 2.0
    )


def tensordot_self(x, y):
    return np.sum(np.tensordot(x, x, 2)) * np.sum(y) + np.sum(np.tensordot(y, x, 1))


@pytest.mark.parametrize("f", [tensordot_positional, tensordot_self])
@pytest.mark.parametrize("n", [2, 3])
def test_tensordot_positional_axes(f, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((n, 3)), rng.standard_normal((3, n))
    if f is tensordot_self:
        y = rng.standard_normal(n)
    for _ in range(2):
        got = s2sad.grad(f, argnums=(0, 1))(x, y)
        for g, e in zip(got, numerical_grad(f, [x, y], (0, 1))):
            np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
