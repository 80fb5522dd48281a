"""Aliasing through calls of user functions: only the arguments a callee's result
may share memory with are linked to it (front/returns.py).

Before, ``r = f(a, b)`` linked r with a and b and, through r, a with b: a change
of one made the other stale (false refusals found by the fuzzer)."""

import ast
import textwrap

import numpy as np
import pytest

import s2sad
from s2sad.errors import AliasingError
from s2sad.testing import numerical_grad
from s2sad.transforms.front import returns


def _fresh_pair(a, b):
    return np.max(b), np.tanh(a) * 2.0


def changes_a_fresh_result(x, w):
    m, t = _fresh_pair(x, w)
    t *= x  # t is a new array: x and w stay as they are
    t[0] = np.sum(w)
    return np.sum(t) + np.sum(x * w) + m


def _row(a, b):
    return b[1]


def changes_a_view_of_one_argument(x):
    y = np.outer(x, x)
    z = np.sin(x)
    r = _row(z, y)  # a view of y, not of z
    r *= x[0]
    return np.sum(z * x) + np.sum(r)


def closure_returns_a_free_variable(x, s):
    t = np.outer(x, x)[0, 1]
    for i in range(2):
        s *= np.tanh(t)

        def inner(z):
            return 2.0 * z if np.mean(x) < -5.0 else s  # noqa: B023

        u = inner(t)
    return s * np.sum(x) + u


class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, a, b):
        return self.k * np.exp(a), a * b


SCALER = Scaler(1.5)


def method_result_changed(x, w):
    e, p = SCALER.apply(x, w)
    e += w
    return np.sum(e * p) + np.sum(x * w)


def _view_and_fresh(a, b):
    return b[0:2], np.tanh(a) * 2.0


def changes_the_fresh_element(x):
    y = np.outer(x, x)
    v, t = _view_and_fresh(x, y)
    t *= x[0]  # a new array: y and v stay as they are
    return np.sum(t) + np.sum(y * x) + np.sum(v)


@pytest.mark.parametrize(
    "fn, args",
    [
        (
            changes_a_fresh_result,
            (np.array([0.3, -0.2, 0.5]), np.array([0.1, 0.4, -0.6])),
        ),
        (
            changes_a_fresh_result,
            (np.array([[0.3, -0.2], [0.5, 0.7]]), np.array([0.1, 0.4])),
        ),
        (changes_a_view_of_one_argument, (np.array([0.3, -0.2, 0.5]),)),
        (changes_the_fresh_element, (np.array([0.3, -0.2, 0.5]),)),
        (closure_returns_a_free_variable, (np.array([0.3, -0.2, 0.5]), 0.7)),
        (method_result_changed, (np.array([0.3, -0.2]), np.array([0.5, 0.1]))),
        (method_result_changed, (np.array([0.3, -0.2]), 0.4)),
    ],
)
def test_a_change_of_a_call_result_does_not_stale_other_arguments(fn, args):
    nums = tuple(range(len(args)))
    fresh = lambda: [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    value, grads = s2sad.value_and_grad(fn, argnums=nums)(*fresh())
    assert np.allclose(value, fn(*fresh()))
    expected = numerical_grad(fn, fresh(), nums)
    for g, e in zip(grads, expected):
        assert np.allclose(g, e, atol=1e-5)


# -- near misses: the result does share the argument that is read afterwards


def reads_the_base_of_a_returned_view(x):
    y = np.outer(x, x)
    z = np.sin(x)
    r = _row(z, y)
    r *= x[0]
    return np.sum(y * x)


def _box(a, b):
    d = {}
    d["v"] = b
    return d


def reads_an_array_stored_in_a_returned_dict(x):
    y = np.outer(x, x)
    z = np.sin(x)
    d = _box(z, y)
    w = d["v"]
    w *= x[0]
    return np.sum(y * x)


def _flat(a, b):
    return a.ravel()


def reads_the_base_of_a_reshaped_result(x):
    y = np.outer(x, x)
    r = _flat(y, x)
    r[0] = x[1]
    return np.sum(y * x)


def _either(a, b):
    return max(a, b, key=np.sum)


def reads_an_argument_max_may_return(x):
    y = np.outer(x, x)
    z = np.outer(x, x) * 2.0
    r = _either(y, z)
    r[0] = x
    return np.sum(y * x) + np.sum(z)


def reads_the_base_of_an_element_of_a_tuple(x):
    # (not a call: an array taken out of a tuple display is that array)
    y = np.outer(x, x)
    w = np.sin(x)
    r = (y, w)
    z = r[0]
    z[0] = x
    return np.sum(y * x)


def reads_the_base_of_the_view_element(x):
    y = np.outer(x, x)
    v, t = _view_and_fresh(x, y)
    v *= x[0]  # changes y
    return np.sum(t) + np.sum(y * x)


def closure_returns_a_view(x):
    y = np.outer(x, x)

    def inner(z):
        return y[0:2] if z > 0.0 else y

    u = inner(1.0)
    u *= x[0]
    return np.sum(y * x)


@pytest.mark.parametrize(
    "fn",
    [
        reads_the_base_of_a_returned_view,
        reads_an_array_stored_in_a_returned_dict,
        reads_the_base_of_a_reshaped_result,
        reads_an_argument_max_may_return,
        closure_returns_a_view,
        reads_the_base_of_an_element_of_a_tuple,
        reads_the_base_of_the_view_element,
    ],
)
def test_a_change_through_a_returned_alias_stays_refused(fn):
    with pytest.raises(AliasingError, match="'y' shares memory"):
        s2sad.grad(fn)(np.array([0.3, -0.2, 0.5]))


def _summary(src: str):
    node = ast.parse(textwrap.dedent(src)).body[0]
    return returns.summary(node, {"np": np, "math": __import__("math")})


def test_summary_of_what_a_result_may_share():
    assert _summary("def f(a, b):\n    return np.tanh(a) + b.sum(), 2.0\n") == set()
    assert _summary("def f(a, b):\n    return a if a.sum() > 0 else b[1:]\n") == {0, 1}
    assert _summary("def f(a, b):\n    c = b\n    return c.T\n") == {1}
    assert _summary("def f(a, b):\n    l = []\n    l.append(a)\n    return l\n") == {0}
    assert _summary("def f(a, b):\n    return g(a)\n") == {0}  # unknown: its arguments
    assert _summary("def f(a, b):\n    return np.exp(a, out=b)\n") == {0, 1}
    assert _summary("def f(a, b):\n    return np.reshape(a, -1)\n") == {0}
    assert _summary("def f(a, b):\n    return b.copy()\n") == {1}  # shallow for a dict
    assert _summary("def f(a, b):\n    return sum(a, [])\n") == {0}
    assert _summary("def f(a, b):\n    return [a] * 2, 2.0 * b\n") == {0}
    assert _summary("def f(a, b):\n    return lambda: a\n") is None
    assert _summary("def f(a, *b):\n    return 1.0\n") is None


def test_summary_per_element_of_a_returned_tuple():
    src = "def f(a, b):\n    if a.sum() > 0:\n        return np.max(b), a[0]\n    return a, 1.0\n"
    node = ast.parse(src).body[0]
    found = returns.analyse(node, {"np": np})
    assert found == ({0}, (frozenset({0}), frozenset({0})))
    src = "def f(a, b):\n    return np.max(b), a[0]\n"
    assert returns.analyse(ast.parse(src).body[0], {"np": np}) == ({0}, (set(), {0}))
    src = "def f(a, b):\n    if a.sum() > 0:\n        return a, b\n"  # may give None
    assert returns.analyse(ast.parse(src).body[0], {"np": np}) == ({0, 1}, None)


def changes_one_element_of_a_tuple(x):
    y = np.outer(x, x)
    w = np.sin(x)
    t = (y, w * 2.0)
    a, b = t  # b is the second element only
    b *= x[0]
    return np.sum(y * x) + np.sum(a) + np.sum(b)


def test_an_element_of_a_tuple_display_is_that_element_only():
    x = np.array([0.3, -0.2, 0.5])
    fn = changes_one_element_of_a_tuple
    value, g = s2sad.value_and_grad(fn)(x.copy())
    assert np.allclose(value, fn(x.copy()))
    np.testing.assert_allclose(g, numerical_grad(fn, [x.copy()], (0,))[0], atol=1e-6)
