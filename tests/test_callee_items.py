"""Item assignment into a called function's parameter (``p[i] = v``): when every
call passes a new array that nothing else holds or reads again (``step(x *
2.0, ...)``), nobody can see the change, and the callee works on a copy taken
at entry (front/inplace.py ``fresh_copies``).  Passing an array that is read
again stays refused at the callee's line; a call whose result is dropped,
run as plain Python, that changes a differentiated array is refused at the
call (it would change the array unseen by the gradient)."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import UnsupportedSyntaxError
from tests.corpus.fd import assert_close_tree, numerical_grad


def step(p, i, v):
    p[i] = v * p[i + 1]
    return p


def set_row(p, h):
    p[0] = np.tanh(h)
    p[1:] = p[1:] * h
    return p


def passes_a_new_array(x, w):
    return np.sum(step(np.exp(x), 0, w[0]) ** 2)


def passes_a_temp_read_once(x, w):
    t = x * w
    r = step(t, 1, np.sin(w[2]))
    return np.sum(r * x)


def in_a_loop(x, w):
    s = 0.0
    for k in range(2):
        s = s + np.sum(step(np.sin(x * (k + 1.0)), k, w[k]) ** 2)
    return s


def rows_of_a_matrix(x, w):
    m = set_row(np.outer(w, x), x)  # w broadcast against the rows
    return np.sum(np.tanh(m))


CASES = [passes_a_new_array, passes_a_temp_read_once, in_a_loop, rows_of_a_matrix]


def _args(n, seed=0):
    rng = np.random.default_rng(seed)
    return [0.5 * rng.normal(size=n), 0.5 * rng.normal(size=n)]


@pytest.mark.parametrize("n", [3, 5])
@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_reverse_forward_and_second_order_match_finite_differences(fn, n):
    x, w = _args(n)
    want = [numerical_grad(fn, [x, w], k) for k in (0, 1)]
    for optimize in (True, False):
        got = s2sad.grad(fn, argnums=(0, 1), optimize=optimize)(x, w)
        for g, e in zip(got, want):
            assert_close_tree(g, e)
    v = np.random.default_rng(1).normal(size=n)
    _, t = s2sad.jvp(fn)(x, w, v)
    assert_close_tree(t, np.sum(want[0] * v), where="jvp")
    hv = s2sad.hvp(fn)(x, w, v)
    eps = 1e-5
    g = s2sad.grad(fn)
    fd = (g(x + eps * v, w) - g(x - eps * v, w)) / (2 * eps)
    assert_close_tree(hv, fd, rtol=1e-4, atol=1e-6, where="hvp")


def passes_an_array_read_again(x, w):
    y = np.exp(x)
    r = step(y, 0, w[0])
    return np.sum(r * y)


def drops_the_result(x, w):
    y = np.exp(x)
    step(y, 0, w[0])
    return np.sum(y)


def drops_the_result_on_its_argument(x, w):
    step(x, 0, w[0])
    return np.sum(x**2)


def test_an_array_read_again_is_refused_at_the_callee():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(passes_an_array_read_again)(*_args(3))
    line = step.__code__.co_firstlineno + 1
    assert f"test_callee_items.py:{line}:" in str(e.value)


@pytest.mark.parametrize(
    "fn", [drops_the_result, drops_the_result_on_its_argument], ids=lambda f: f.__name__
)
def test_a_dropped_result_that_changed_a_differentiated_array_is_refused(fn):
    line = fn.__code__.co_firstlineno + (2 if fn is drops_the_result else 1)
    runs = [
        lambda: s2sad.grad(fn)(*_args(3)),
        lambda: s2sad.jvp(fn)(*_args(3), np.ones(3)),
    ]
    for run in runs:
        with pytest.raises(UnsupportedSyntaxError) as e:
            run()
        assert f"test_callee_items.py:{line}:" in str(e.value)
        assert "changes the differentiated array" in str(e.value)


def write_through_an_alias(p, v):
    a = p["x"]
    a[0] = v[0] * 2.0


def config_changed_by_a_helper(v, p):
    write_through_an_alias(p, v)  # was a silent zero gradient for v[0]
    return np.sum(p["x"] * v)


def test_a_dropped_result_that_changed_an_object_through_an_alias_is_refused():
    line = config_changed_by_a_helper.__code__.co_firstlineno + 1
    v = np.array([0.5, 0.2, 0.3])
    runs = [
        lambda: s2sad.grad(config_changed_by_a_helper)(v, {"x": np.ones(3)}),
        lambda: s2sad.jvp(config_changed_by_a_helper)(v, {"x": np.ones(3)}, v),
    ]
    for run in runs:
        with pytest.raises(UnsupportedSyntaxError) as e:
            run()
        assert f"test_callee_items.py:{line}:" in str(e.value)
        assert "changes an object it is given in place" in str(e.value)
