"""Corpus: calls to user functions, keywords, defaults, recursion, closures, lambdas, methods."""

import numpy as np

from tests.corpus.registry import case, const, mat, scal, vec


def square(x):
    return x * x


def affine(x, w, b=1.0):
    return x * w + b


def two_outputs(x):
    return np.sin(x), np.cos(x)


def with_loop(x, n):
    y = x
    for i in range(n):
        y = y * 0.5 + square(y)
    return y


def power_rec(x, n):
    if n == 0:
        return x * 0 + 1.0
    return x * power_rec(x, n - 1)


def fib_like(x, n):
    if n <= 1:
        return x
    return fib_like(x, n - 1) + 0.5 * fib_like(x, n - 2)


def early(x):
    if np.sum(x) > 1000:
        return x
    return np.tanh(x)


def uses_global_fn(x):
    return square(x) + affine(x, 2.0)


class Scaler:
    def __init__(self, scale):
        self.scale = scale

    def apply(self, x):
        return self.scale * np.tanh(x)


SCALER = Scaler(3.0)


@case(vec(3))
def call_simple(x):
    return np.sum(square(x))


@case(vec(3), vec(3), argnums=(0, 1))
def call_keyword(x, w):
    return np.sum(affine(x, w=w, b=0.5))


@case(vec(3), vec(3))
def call_default(x, w):
    return np.sum(affine(x, w))


@case(vec(3))
def call_two_outputs(x):
    s, c = two_outputs(x)
    return np.sum(s * c)


@case(vec(3))
def call_in_loop(x):
    y = x
    for i in range(3):
        y = square(y) * 0.3 + x
    return np.sum(y)


@case(vec(3))
def call_with_loop_inside(x):
    return np.sum(with_loop(x, 3))


@case(scal())
def recursion(x):
    return power_rec(x, 4)


@case(scal())
def recursion_two_calls(x):
    return fib_like(x, 5)


@case(vec(3))
def call_early_return(x):
    return np.sum(early(x) * x)


@case(vec(3))
def call_nested_calls(x):
    return np.sum(uses_global_fn(square(x)))


@case(vec(3))
def call_same_fn_twice(x):
    return np.sum(square(x) + square(x * 2))


@case(vec(3))
def call_inactive_arg(x):
    k = square(2.0)
    return np.sum(x * k)


@case(vec(3))
def closure_reads_local(x):
    w = x * 2

    def f(t):
        return t * w

    return np.sum(f(x))


@case(vec(3))
def lambda_reads_local(x):
    w = np.sin(x)
    f = lambda t: t * w + 1.0
    return np.sum(f(x) * f(w))


@case(vec(3))
def nested_def_in_loop(x):
    def step(t):
        return np.tanh(t) + t

    y = x
    for i in range(3):
        y = step(y)
    return np.sum(y)


@case(vec(3))
def nested_def_in_nested_def(x):
    # g is inner's own function, not a free name of the outer one
    def inner(w):
        def g(v):
            return np.sin(v) * w

        return g(x) + w

    return np.sum(inner(np.cos(x)))


def make_closure(scale):
    def inner(x):
        return np.sum(x * scale)

    return inner


closure_fn = make_closure(2.5)
case(vec(3))(closure_fn)


@case(vec(3))
def global_object_method(x):
    return np.sum(SCALER.apply(x))


@case(vec(3))
def global_object_attribute(x):
    return np.sum(x * SCALER.scale)


@case(vec(3), const(Scaler(0.5)))
def argument_object_method(x, obj):
    return np.sum(obj.apply(x) * obj.scale)


@case(mat(2, 3), vec(3))
def call_matrix_fn(W, x):
    return np.sum(np.tanh(W @ square(x)))
