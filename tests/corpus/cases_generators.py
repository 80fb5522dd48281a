"""Corpus: generator functions (run to their end when called, consumed as lists)."""

import numpy as np

from tests.corpus.registry import case, lst, mat, vec


def unpack_layers(params):
    # autograd/examples/neural_net.py style
    for W, b in params:
        yield W, b


@case(lst(lst(mat(3, 3), vec(3)), lst(mat(3, 3), vec(3))), vec(3))
def gen_layers_in_for(params, x):
    for W, b in unpack_layers(params):
        x = np.tanh(x @ W + b)
    return np.sum(x)


def squares(xs):
    for v in xs:
        yield v * v


@case(vec(4))
def gen_consumed_by_sum(x):
    return sum(squares(x)) + np.sum(np.stack(list(squares(x))) * x)


def pairs(x):
    """Consecutive pairs."""
    for i in range(len(x) - 1):
        yield x[i], x[i + 1]


@case(vec(5))
def gen_with_docstring_and_unpack(x):
    total = 0.0
    for a, b in pairs(x):
        total = total + a * np.sin(b)
    return total


def until_negative(xs):
    for v in xs:
        if v < 0.0:
            return
        yield np.exp(v)


@case(vec(6, positive=True))
def gen_with_early_return(x):
    y = np.concatenate([x[:3], -x[3:4], x[4:]])
    return sum(until_negative(y))


def chained(a, b):
    yield from squares(a)
    yield from b


@case(vec(3), vec(2))
def gen_yield_from(a, b):
    out = 0.0
    for k, v in enumerate(chained(a, b)):
        out = out + (k + 1.0) * v
    return out


def scaled(xs, s):
    for v in xs:
        yield s * v


@case(vec(3), vec(3))
def gen_zip_two_generators(a, b):
    return sum(p * q for p, q in zip(scaled(a, 2.0), squares(b)))


@case(mat(3, 2))
def gen_in_loop_and_unpacked(X):
    acc = 0.0
    for row in X:
        first, second = scaled(row, 3.0)
        acc = acc + first * second
    return acc


def windows(x, width):
    i = 0
    while i + width <= len(x):
        yield x[i : i + width]
        i += 1


@case(vec(6))
def gen_while_windows(x):
    return sum(np.prod(w) for w in windows(x, 2))
