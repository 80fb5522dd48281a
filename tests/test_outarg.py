"""``out=`` on NumPy calls: on a local array or an argument of the differentiated
function it is the item assignment ``y[...] = f(...)`` (front/outarg.py), with
gradients checked against central differences in both modes and at second
order; into anything else, with differentiated inputs, it is refused, never a
zero gradient."""

import numpy as np
import pytest

import s2sad
from s2sad.errors import AliasingError, UnsupportedSyntaxError
from tests.corpus.fd import assert_close_tree, numerical_grad

GLOBAL_BUFFER = np.zeros(3)


def add_into_local(x, b):
    y = np.sin(x)
    np.add(y, b, out=y)  # b broadcasts along the rows of a matrix x
    return np.sum(y**2)


def scale_local_with_result(x, b):
    h = x * b
    z = np.multiply(h, 0.5, out=h)
    return np.sum(z**3) + np.sum(h)


def fill_a_fresh_buffer(x, b):
    y = np.zeros(np.shape(x))
    np.exp(x * b, out=y)
    return np.sum(y * y)


def in_a_loop(x, b):
    y = np.ones(np.shape(x))
    for _ in range(3):
        np.multiply(y, x, out=y)
        np.add(y, b, out=(y,))
    return np.sum(np.tanh(y))


def helper(x, b):
    y = np.cos(x)
    np.subtract(y, b, out=y)
    return y


def in_a_callee(x, b):
    return np.sum(helper(x, b) ** 2)


def into_the_argument(x, b):
    np.multiply(x, b, out=x)
    return np.sum(x**3)


FUNCTIONS = [
    add_into_local,
    scale_local_with_result,
    fill_a_fresh_buffer,
    in_a_loop,
    in_a_callee,
    into_the_argument,
]
SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((4, 1), (1,))]


def _args(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [0.5 * rng.normal(size=s) for s in shapes]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_reverse_mode_matches_finite_differences(fn, shapes):
    x, b = _args(shapes)
    for argnum in (0, 1):
        want = numerical_grad(lambda *a: fn(a[0].copy(), a[1]), [x, b], argnum)
        for optimize in (True, False):
            got = s2sad.grad(fn, argnums=argnum, optimize=optimize)(x.copy(), b)
            assert_close_tree(got, want, where=f"{fn.__name__} {argnum}")


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_forward_mode_and_second_order(fn):
    x, b = _args(((2, 3), (3,)))
    v = np.random.default_rng(1).normal(size=x.shape)
    _, t = s2sad.jvp(fn)(x.copy(), b, v)
    want = np.sum(numerical_grad(lambda *a: fn(a[0].copy(), a[1]), [x, b], 0) * v)
    assert_close_tree(t, want, where="jvp")
    hv = s2sad.hvp(fn)(x.copy(), b, v)
    eps = 1e-5
    g = s2sad.grad(fn)
    fd = (g(x + eps * v, b) - g(x - eps * v, b)) / (2 * eps)
    assert_close_tree(hv, fd, rtol=1e-4, atol=1e-6, where="hvp")


def test_the_argument_given_to_out_ends_as_python_leaves_it():
    x, b = _args(((2, 3), (3,)))
    plain, mine = x.copy(), x.copy()
    into_the_argument(plain, b)
    s2sad.grad(into_the_argument)(mine, b)
    np.testing.assert_allclose(mine, plain, rtol=1e-15)


def view_then_out(x):
    y = np.sin(x)
    z = y[0:2]
    np.add(y, x, out=y)
    return np.sum(z**2)


def into_a_global(x):
    np.exp(x, out=GLOBAL_BUFFER)
    return np.sum(GLOBAL_BUFFER**2)


def with_where(x):
    y = np.zeros(3)
    np.exp(x, out=y, where=x > 0)
    return np.sum(y**2)


def step(p, v):
    np.add(p, v, out=p)
    return p


def into_a_callee_parameter(x):  # a new array: nobody sees the change
    return np.sum(step(np.ones(3), x) ** 2)


def into_a_callee_parameter_read_again(x):
    y = np.exp(x)
    r = step(y, x)
    return np.sum(r * y)


def test_a_view_read_after_out_changed_its_base_is_refused():
    with pytest.raises(AliasingError):
        s2sad.grad(view_then_out)(np.ones(3))


@pytest.mark.parametrize("fn", [into_a_global, with_where], ids=lambda f: f.__name__)
def test_out_into_what_s2sad_cannot_follow_is_refused_in_both_modes(fn):
    x = np.array([0.1, -0.2, 0.3])
    line = fn.__code__.co_firstlineno + (1 if fn is into_a_global else 2)
    for run in (lambda: s2sad.grad(fn)(x), lambda: s2sad.jvp(fn)(x, np.ones(3))):
        with pytest.raises(UnsupportedSyntaxError) as e:
            run()
        assert f"test_outarg.py:{line}:" in str(e.value)
        assert "out= receives a value computed from differentiated" in str(e.value)


def test_out_into_a_callee_parameter_given_a_new_array():
    x = np.array([0.1, -0.2, 0.3])
    want = numerical_grad(into_a_callee_parameter, [x], 0)
    assert_close_tree(s2sad.grad(into_a_callee_parameter)(x), want)
    _, t = s2sad.jvp(into_a_callee_parameter)(x, np.ones(3))
    assert_close_tree(t, np.sum(want), where="jvp")


def test_out_into_a_callee_parameter_read_again_is_refused_at_its_line():
    with pytest.raises(UnsupportedSyntaxError) as e:
        s2sad.grad(into_a_callee_parameter_read_again)(np.ones(3))
    assert f"test_outarg.py:{step.__code__.co_firstlineno + 1}:" in str(e.value)
