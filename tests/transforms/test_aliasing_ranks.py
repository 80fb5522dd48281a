"""Aliasing: the number of dimensions of local values (front/ranks.py).

``e = mat[0, 1]`` on a 2-d local holds a NumPy scalar, so ``e *= 3.0`` rebinds
``e`` and leaves ``mat`` alone; before, only arguments had known ranks and the
change was taken for an in-place change of ``mat`` (false refusals found by
the fuzzer).  Views and 0-d arrays (``np.where`` always makes an array) stay
watched."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import AliasingError
from s2sad.testing import numerical_grad


def element_of_a_local_matrix(x, w):
    mat = np.outer(x, w)
    e = mat[0, 1]  # rank 2, two integer indices: a NumPy scalar
    e *= 3.0
    return np.sum(mat * w) + e


def dot_of_vectors(x, w):
    d = np.dot(x, w)
    t = d
    d += 1.0  # rebinds d: t keeps the old value
    return t * d


def element_after_reshape(x, w):
    r = (np.linspace(0.0, 1.0, 6).reshape(2, 3) * x)[1, 2]
    q = r
    r -= w[0]
    return q * r + np.sum(x * w)


def matmul_of_vectors_in_a_loop(x, w):
    s = x @ w
    for i in range(3):
        u = s
        s *= np.tanh(w[i])
        s = s + u
    return s


@pytest.mark.parametrize(
    "fn",
    [
        element_of_a_local_matrix,
        dot_of_vectors,
        element_after_reshape,
        matmul_of_vectors_in_a_loop,
    ],
    ids=lambda f: f.__name__,
)
def test_scalars_of_local_arrays_are_rebound(fn):
    rng = np.random.default_rng(11)
    args = [rng.normal(size=3), rng.normal(size=3)]
    fresh = lambda: [a.copy() for a in args]
    value, grads = s2sad.value_and_grad(fn, argnums=(0, 1))(*fresh())
    assert np.allclose(value, fn(*fresh()))
    for g, e in zip(grads, numerical_grad(fn, fresh(), (0, 1))):
        np.testing.assert_allclose(g, e, atol=1e-6)


# -- near misses


def row_of_a_local_matrix(x, w):
    mat = np.outer(x, w)
    row = mat[0]  # one integer index of two: a view
    row *= 3.0
    return np.sum(mat * w)


def zero_d_array_from_where(x, w):
    s = np.where(x[0] > 0, x[0], w[1])  # a 0-d array: += changes it in place
    t = s
    s += 1.0
    return t * x[2] + s


def rows_in_a_for_loop(x, w):
    mat = np.outer(x, w)
    for row in mat:
        row *= 2.0
    return np.sum(mat * x)


def rank_lost_in_a_branch(x, w):
    y = np.outer(x, w)
    if np.sum(x) > 0.0:
        y = y[0]  # a vector on this path only
    e = y[1]  # a scalar or a row: a row is a view
    e *= 2.0
    return np.sum(y * w)


@pytest.mark.parametrize(
    "fn, name",
    [
        (row_of_a_local_matrix, "mat"),
        (zero_d_array_from_where, "t"),
        (rows_in_a_for_loop, "mat"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
def test_views_and_0d_arrays_stay_watched(fn, name):
    x, w = np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.6])
    with pytest.raises(AliasingError, match=f"'{name}' shares memory"):
        s2sad.grad(fn, argnums=(0, 1))(x, w)


def test_rank_lost_in_a_branch_is_checked_when_it_runs():
    """``e`` is a number on one path (``*=`` rebinds it, as Python does) and a
    row of ``y`` on the other: the emitted code checks which (front/rebinds.py)
    and refuses the row, located as the compile-time refusal was."""
    x, w = np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.6])
    g = s2sad.grad(rank_lost_in_a_branch, argnums=(0, 1))(x, w)
    for k, a in enumerate((x, w)):
        want = np.zeros(3)
        for i in range(3):
            d = np.eye(3)[i] * 1e-6
            plus = [x + d, w] if k == 0 else [x, w + d]
            minus = [x - d, w] if k == 0 else [x, w - d]
            want[i] = (
                rank_lost_in_a_branch(*plus) - rank_lost_in_a_branch(*minus)
            ) / 2e-6
        np.testing.assert_allclose(g[k], want, rtol=1e-6, atol=1e-9)
    with pytest.raises(AliasingError, match="'y' shares memory") as err:
        s2sad.grad(rank_lost_in_a_branch, argnums=(0, 1))(-x, w)
    assert "was a ndarray when it ran" in str(err.value)


def _total(a, b):
    return np.sum(a * b) + 1.0


def _first(a, b):
    return a if np.sum(b) > 0.0 else np.sum(b)


def _scales(p, q):
    p *= 2.0  # a scalar at every call below: rebinds p
    return p * q


def callee_returns_a_scalar(x, w):
    s = _total(x, w)
    t = s
    s *= 3.0  # rebinds s: t keeps the old value
    return t * s + np.sum(_scales(s, x))


def callee_may_return_an_array(x, w):
    s = _first(x, w)  # may be x itself
    t = s
    s *= 3.0
    return np.sum(t * w)


def test_a_callee_returning_a_scalar_by_its_source():
    rng = np.random.default_rng(2)
    args = [rng.normal(size=3), rng.normal(size=3)]
    fn = callee_returns_a_scalar
    fresh = lambda: [a.copy() for a in args]
    value, grads = s2sad.value_and_grad(fn, argnums=(0, 1))(*fresh())
    assert np.allclose(value, fn(*fresh()))
    for g, e in zip(grads, numerical_grad(fn, fresh(), (0, 1))):
        np.testing.assert_allclose(g, e, atol=1e-6)
    x, w = np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, 0.6])
    with pytest.raises(AliasingError, match="'t' shares memory"):
        s2sad.grad(callee_may_return_an_array, argnums=(0, 1))(x, w)


def _method_result(a, b):
    return a.ravel()


def _unknown_call(a, b):
    return helper_that_does_not_exist(a)  # noqa: F821


def test_returns_scalar_reads_the_source():
    from s2sad.transforms.front import returns

    assert returns.returns_scalar(_total)
    assert not returns.returns_scalar(_first)
    assert not returns.returns_scalar(_method_result)
    assert not returns.returns_scalar(_unknown_call)
    assert not returns.returns_scalar(np.sum)  # no Python source
