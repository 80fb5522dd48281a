"""The allow-list of primitives verified on torch, array-api-strict (also on its
second device, the GPU stand-in) and CuPy: each one's value and gradient equal
NumPy's in float64, on several shapes with broadcasting.

NumPy's own gradient of each function is checked against central finite
differences first, so the libraries are compared with a checked reference.
"""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.runtime import nn
from tests.backends.libraries import check_against_numpy
from tests.corpus.fd import assert_close_tree, numerical_grad


def arithmetic(x, y):
    return np.sum(x * y - x / y + (-x) ** 3 + y**2.5 + 2.0 * x - y + 1.0)


def math_functions(x, y):
    return np.sum(
        np.exp(x) + np.log(y) + np.sin(x) * np.cos(y) + np.tanh(x * y)
    ) + np.sum(np.sqrt(y) + np.abs(x))


def more_math(x, y):
    a = np.log1p(y) + np.expm1(x) * np.sign(x) + np.square(x - y)
    return np.sum(a * nn.sigmoid(x * y))


def maximum(x, y):
    return np.sum(np.maximum(x, y) ** 2) + np.sum(np.maximum(x, 0.1) * y)


def minimum(x, y):
    return np.sum(np.minimum(x, y) ** 2) + np.sum(np.min(x * y, axis=0) ** 2)


def batched(A, B):
    return np.sum(np.tanh(A @ B)) + np.sum(np.zeros_like(A) + np.ones_like(A) * A)


def reductions(x, y):
    a = np.sum(np.max(x * y, axis=-1, keepdims=True) ** 2)
    b = np.sum(np.mean(x, axis=0) ** 2) + np.sum(np.sum(x * y, axis=1) ** 3)
    return a + b + np.max(x) * np.mean(y) + np.sum(np.mean(y, axis=1, keepdims=True))


def matmuls(A, v):
    return np.sum(np.tanh(A @ A.T) @ v) + np.sum((A.T @ A) ** 2)


def shapes(A, v):
    B = np.reshape(A, (-1,))
    return (
        np.sum(np.transpose(A) @ v) + np.sum(B**3) + np.sum(np.reshape(B, (2, -1)) ** 2)
    )


def slices(A, v):
    return np.sum(A[1:, :2] ** 2) + np.sum(A[0, :] * v) + np.sum(A[:, -1] ** 3)


def where(x, y):
    return np.sum(np.where(x > 0, x * y, 2 * x)) + np.sum(np.where(y > 1, y, 0.0))


def joining(x, y):
    c = np.concatenate([x, y * 2], axis=0)
    s = np.stack([x, y], axis=1)
    return np.sum(c**2) + np.sum(s**3) + np.sum(np.concatenate([x, y], axis=-1) * 0.5)


def cross_entropy(W, X, labels):
    return nn.softmax_cross_entropy(X @ W, labels)


def rng_args(shapes_, positive=(), seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i, shape in enumerate(shapes_):
        a = rng.normal(size=shape)
        out.append(np.abs(a) + 0.5 if i in positive else a)
    return out


#: primitive -> (function, argument shapes per case, positive arguments, argnums)
PRIMITIVES = {
    "arithmetic": (
        arithmetic,
        [[(3, 4), (3, 4)], [(3, 4), (4,)], [(2, 1, 3), (4, 1)]],
        (1,),
    ),
    "math": (math_functions, [[(5,), (5,)], [(2, 3), (3,)], [(3, 1), (1, 4)]], (1,)),
    "more_math": (more_math, [[(5,), (5,)], [(2, 3), (3,)]], (1,)),
    "maximum": (maximum, [[(6,), (6,)], [(3, 4), (4,)]], ()),
    "minimum": (minimum, [[(6,), (6,)], [(3, 4), (4,)]], ()),
    "batched_matmul": (batched, [[(2, 3, 4), (4, 2)], [(3, 2, 2), (2, 2)]], ()),
    "reductions": (
        reductions,
        [[(3, 4), (3, 4)], [(3, 4), (1, 4)], [(2, 3, 4), (3, 4)]],
        (),
    ),
    "matmul_transpose": (matmuls, [[(3, 4), (3,)], [(4, 2), (4,)]], ()),
    "reshape_transpose": (shapes, [[(3, 4), (3,)], [(2, 6), (2,)]], ()),
    "slices": (slices, [[(3, 4), (4,)], [(4, 3), (3,)]], ()),
    "where": (where, [[(3, 4), (3, 4)], [(3, 4), (4,)]], ()),
    "concatenate_stack": (joining, [[(2, 3), (2, 3)], [(3, 1), (3, 1)]], ()),
}


def _cases():
    for name, (fn, cases, positive) in PRIMITIVES.items():
        for i, shapes_ in enumerate(cases):
            yield pytest.param(fn, shapes_, positive, id=f"{name}-{i}")


@pytest.mark.parametrize("fn, shapes_, positive", list(_cases()))
def test_numpy_reference_matches_finite_differences(fn, shapes_, positive):
    args = rng_args(shapes_, positive)
    grads = s2sad.grad(fn, argnums=(0, 1))(*args)
    for i in (0, 1):
        want = numerical_grad(fn, rng_args(shapes_, positive), i)
        assert_close_tree(grads[i], want, where=f"{fn.__name__} d/darg{i}")


@pytest.mark.parametrize("fn, shapes_, positive", list(_cases()))
def test_primitive_matches_numpy(lib, fn, shapes_, positive):
    check_against_numpy(lib, fn, rng_args(shapes_, positive), argnums=(0, 1))


def _ce_args(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(4, 5)), rng.normal(size=(6, 4)), rng.integers(0, 5, 6)]


def test_cross_entropy_reference_matches_finite_differences():
    g = s2sad.grad(cross_entropy)(*_ce_args())
    assert_close_tree(g, numerical_grad(cross_entropy, _ce_args(), 0), where="W")


def test_cross_entropy_matches_numpy(lib):
    check_against_numpy(lib, cross_entropy, _ce_args())


def test_python_float_parameter_comes_back_in_the_library(lib):
    def scaled(x, s):
        return np.sum(np.tanh(s * x))

    check_against_numpy(lib, scaled, [np.linspace(-1, 1, 5), 0.7], argnums=(0, 1))


def test_float64_is_the_default_for_new_arrays(lib):
    """np.zeros without a dtype gives float64 on the arguments' device, as NumPy."""

    def padded(x):
        z = np.zeros((2, x.shape[1]))
        return np.sum(np.concatenate([x, z], axis=0) ** 2) + np.sum(np.ones(3) * 2.0)

    check_against_numpy(lib, padded, [np.arange(6.0).reshape(3, 2) / 5])


def test_float32_arguments_give_float32_gradients(lib):
    def loss(w, X):
        return np.mean(np.tanh(X @ w) ** 2)

    w = np.linspace(-1, 1, 3).astype(np.float32)
    X = (np.arange(12.0).reshape(4, 3) / 10).astype(np.float32)
    check_against_numpy(lib, loss, [w, X], rtol=1e-6)
