"""Callees known only at run time (issue 14, item 4): the compiled code is
specialised on the function it was given, checks it first thing, and compiles
again when another function comes (never runs code made for the old one)."""

import numpy as np
import pytest

import s2sad
from s2sad import pipeline
from s2sad.errors import GlobalsChangedError
from tests.corpus.cases_runtime_callees import (
    decay,
    dynamics,
    ode_two_dynamics,
    odeint,
    sigmoid,
)
from tests.corpus.fd import assert_close_tree, numerical_grad

RNG = np.random.default_rng(11)
W = RNG.normal(size=(3, 2))
X = RNG.normal(size=(4, 3))


def loss(W, x, activation):
    return np.sum(activation(x @ W) ** 2)


def check(fn, args, argnum=0):
    got = s2sad.grad(fn, argnums=argnum)(*args)
    assert_close_tree(got, numerical_grad(fn, list(args), argnum), where=fn.__name__)
    return got


def make_act(k):
    return lambda z: np.tanh(k * z)


@pytest.mark.parametrize("first, second", [(np.tanh, np.sin), (sigmoid, np.tanh)])
def test_rebound_function_argument_compiles_again(first, second):
    g = s2sad.grad(loss)
    for activation in (first, second, first):
        want = numerical_grad(loss, [W, X, activation], 0)
        assert_close_tree(g(W, X, activation), want, where=activation.__name__)
    # the new function's gradient, not the old one's
    assert not np.allclose(g(W, X, first), g(W, X, second))


def test_rebound_by_keyword():
    g = s2sad.grad(loss)
    a = g(W, X, activation=np.tanh)
    b = g(W, X, activation=np.cos)
    assert_close_tree(a, numerical_grad(loss, [W, X, np.tanh], 0), where="tanh")
    assert_close_tree(b, numerical_grad(loss, [W, X, np.cos], 0), where="cos")


def test_closures_of_one_lambda_with_different_cells():
    """make_act(2.0) and make_act(3.0) share their code; each gets its gradient."""
    g = s2sad.grad(loss)
    for k in (2.0, 3.0, 2.0):
        act = make_act(k)
        want = numerical_grad(loss, [W, X, act], 0)
        assert_close_tree(g(W, X, act), want, where=f"k={k}")


def through_callee(W, x, activation):
    return np.sum(inner(W, x, activation))


def inner(W, x, act):
    return act(x @ W) * 2.0


def test_function_argument_handed_on_to_a_callee():
    g = s2sad.grad(through_callee)
    for activation in (np.tanh, sigmoid, np.sin):
        want = numerical_grad(through_callee, [W, X, activation], 0)
        assert_close_tree(g(W, X, activation), want, where=activation.__name__)


def test_emitted_code_checks_the_function_first():
    text = pipeline.compile_function(loss, (0,), example_args=(W, X, np.tanh))[0]
    assert "activation is not tanh" in text
    assert "globals_changed(" in text


def test_stale_code_raises_instead_of_running():
    text, bindings = pipeline.compile_function(loss, (0,), example_args=(W, X, np.tanh))
    namespace = dict(bindings)
    exec(compile(text, "<generated>", "exec"), namespace)  # noqa: S102
    _, grads = namespace["loss_value_and_grad"](W, X, np.tanh)
    assert_close_tree(grads[0], numerical_grad(loss, [W, X, np.tanh], 0), where="tanh")
    with pytest.raises(GlobalsChangedError):
        namespace["loss_value_and_grad"](W, X, np.sin)


def test_two_call_sites_two_callees():
    """odeint with dynamics and with decay: two compiled callees, both right."""
    y0 = RNG.normal(size=3)
    text = pipeline.compile_function(ode_two_dynamics, (0,), example_args=(y0,))[0]
    assert text.count("def odeint_forward") == 2
    check(ode_two_dynamics, (y0,))


def ode_same_twice(y0):
    a = odeint(dynamics, y0, np.linspace(0, 1, 3))
    return np.sum(odeint(dynamics, a, np.linspace(1, 2, 3)))


def test_same_function_twice_one_callee():
    y0 = RNG.normal(size=3)
    text = pipeline.compile_function(ode_same_twice, (0,), example_args=(y0,))[0]
    assert text.count("def odeint_forward") == 1
    check(ode_same_twice, (y0,))


def ode_loss(y0, func):
    return np.sum(odeint(func, y0, np.linspace(0, 1, 4)))


def test_ode_dynamics_given_to_grad_rebound():
    y0 = RNG.normal(size=3)
    g = s2sad.grad(ode_loss)
    for func in (dynamics, decay, dynamics):
        assert_close_tree(
            g(y0, func), numerical_grad(ode_loss, [y0, func], 0), where=func.__name__
        )


def test_forward_mode_rebinding():
    v = RNG.normal(size=W.shape)
    jvp = s2sad.jvp(loss, argnums=0)
    for activation in (np.tanh, np.sin):
        _, tangent = jvp(W, X, activation, v)
        h = 1e-6
        want = (loss(W + h * v, X, activation) - loss(W - h * v, X, activation)) / (
            2 * h
        )
        np.testing.assert_allclose(tangent, want, rtol=1e-6)


def keep_then_call(x, f):
    g = f  # the function parameter is not only called: not specialised
    return g(x)


def lambda_into_callee_that_keeps_it(W, x):
    return np.sum(keep_then_call(x @ W, lambda z: np.tanh(z)))


def vectorize_object_into_callee(x):
    return np.sum(inner(np.eye(3), x, np.vectorize(np.sin)))


@pytest.mark.parametrize(
    "fn", [lambda_into_callee_that_keeps_it, vectorize_object_into_callee]
)
def test_callees_it_cannot_resolve_are_refused_with_their_line(fn):
    """Not specialised (yet): a clear located refusal, never a wrong gradient."""
    args = (W, X) if fn is lambda_into_callee_that_keeps_it else (X,)
    with pytest.raises(s2sad.errors.MissingRuleError) as info:
        s2sad.grad(fn)(*args)
    assert "cannot tell which function" in str(info.value)
    assert "test_runtime_callees.py:" in str(info.value)
