"""Corpus: callees known only at run time (issue 14, item 4): functions passed
as arguments (an ODE integrator's dynamics, an activation given to ``grad``),
callable defaults, ``map``, ``functools.partial`` and ``functools.reduce``."""

import functools
from functools import partial

import numpy as np

from tests.corpus.registry import case, const, lst, mat, vec


def dynamics(y, t):
    return -y * t + np.sin(y)


def decay(y, t):
    return -0.5 * y * y


def odeint(func, y0, ts):
    """Euler steps of dy/dt = func(y, t) (autograd's neural ODE example's shape)."""
    y = y0
    for i in range(len(ts) - 1):
        y = y + (ts[i + 1] - ts[i]) * func(y, ts[i])
    return y


@case(vec(3))
def ode_function_argument(y0):
    return np.sum(odeint(dynamics, y0, np.linspace(0, 1, 5)) ** 2)


@case(vec(3))
def ode_two_dynamics(y0):
    """Two call sites passing different functions: two compiled callees."""
    a = odeint(dynamics, y0, np.linspace(0, 1, 4))
    b = odeint(decay, y0, np.linspace(0, 0.5, 3))
    return np.sum(a * b)


def predict(params, x, nonlinearity=np.tanh):
    return nonlinearity(x @ params)


@case(mat(3, 2), mat(4, 3), argnums=(0, 1))
def callable_default(W, x):
    return np.sum(predict(W, x) ** 2)


@case(mat(3, 2), mat(4, 3))
def callable_default_overridden(W, x):
    return np.sum(predict(W, x, np.sin) + predict(W, x, nonlinearity=np.exp))


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def layer(W, x, act):
    return act(x @ W)


@case(mat(3, 3), mat(2, 3))
def user_function_in_a_loop(W, x):
    """A user function passed through a loop: act is known at each call site."""
    for act in (0, 1):
        x = layer(W, x, sigmoid) if act == 0 else layer(W, x, np.tanh)
    return np.sum(x)


@case(mat(3, 2), mat(4, 3), const(np.tanh), argnums=(0, 1))
def activation_argument(W, x, activation):
    """The differentiated function itself gets a function (grad(f)(W, x, np.tanh))."""
    return np.sum(activation(x @ W) ** 2)


@case(mat(3, 2), mat(4, 3), const(sigmoid))
def user_activation_argument(W, x, activation):
    return np.sum(layer(W, x, activation))


@case(vec(4))
def sum_map_ufunc(x):
    return sum(map(np.sin, x))


def sq_err(p, d):
    return np.sum((p * d - 1.0) ** 2)


@case(vec(3), lst(vec(3), vec(3), vec(3)))
def sum_map_partial(p, data):
    return sum(map(partial(sq_err, p), data))


@case(vec(3), lst(vec(3), vec(3)), argnums=(0, 1))
def partial_alias_called(p, data):
    loss_of = functools.partial(sq_err, p)
    total = 0.0
    for d in data:
        total = total + loss_of(d)
    return total


@case(vec(3), vec(3))
def partial_called_at_once(p, d):
    return partial(sq_err, p)(d) * 2.0


@case(lst(vec(3), vec(3), vec(3)))
def reduce_lambda(xs):
    return np.sum(functools.reduce(lambda a, b: a * b, xs))


@case(mat(3, 3), mat(3, 3))
def reduce_with_initial(A, B):
    prod = functools.reduce(np.dot, [A, B, A], np.eye(3))
    return np.sum(prod**2)


@case(lst(vec(2), vec(2)), lst(vec(2), vec(2)), argnums=(0, 1))
def map_two_sequences(xs, ys):
    return np.sum(np.stack(list(map(lambda a, b: a * np.exp(b), xs, ys))))


@case(mat(3, 4))
def map_over_rows_in_loop(X):
    total = 0.0
    for k in range(2):
        total = total + sum(map(np.tanh, X * (k + 1)))
    return np.sum(total)


def make_act(k):
    return lambda z: np.tanh(k * z)


@case(mat(3, 2), mat(4, 3), argnums=(0, 1))
def returned_lambda(W, x):
    act = make_act(2.0)
    return np.sum(act(x @ W))


@case(mat(3, 3), mat(2, 3), vec(1, positive=True), argnums=(0, 2))
def returned_lambda_over_argument_in_loop(W, x, k):
    act = make_act(k[0])
    for _ in range(2):
        x = act(x @ W)
    return np.sum(x**2)


def soft_step(v):
    """A Python scalar function with a branch, as np.vectorize is given."""
    if v > 0:
        return v * v
    return 0.5 * np.sin(v)


@case(mat(2, 3))
def vectorize_python_function(x):
    return np.sum(np.vectorize(soft_step)(x) * x)


@case(vec(3))
def list_of_map_indexed(x):
    """Refused before issue 14 (tests/fixtures/bad_code.py had it)."""
    ys = list(map(np.sin, x))
    return ys[0] + ys[1]
