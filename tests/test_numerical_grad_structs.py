"""s2sad.testing.numerical_grad of dataclass and namedtuple arguments.

A namedtuple argument reached the function as a list (AttributeError on its
fields, or a wrong method), and a dataclass's gradient was None: its fields
were no float values to the helper.  Each is now perturbed field by field and
rebuilt in its own type (s2sad.runtime.pytrees), like s2sad's gradients.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pytest

import s2sad
from s2sad.testing import is_float_value, numerical_grad


@dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    name: str = "dense"


class Pair(NamedTuple):
    a: np.ndarray
    s: float

    def value(self, x):
        return np.sum(self.a * x) * self.s


def layers_loss(layers, x):
    for layer in layers:
        x = np.tanh(x @ layer.W + layer.b)
    return np.sum(x**2)


def pair_loss(p, x):
    return p.value(x) + p.s**2


def _leaves(tree):
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, Layer):
        return [tree.W, tree.b]
    return [np.asarray(tree, dtype=float)]


@pytest.mark.parametrize("n", [2, 3])
def test_dataclass_list(n):
    rng = np.random.default_rng(n)
    layers = [
        Layer(rng.standard_normal((n, n)), rng.standard_normal(n)) for _ in range(2)
    ]
    x = rng.standard_normal((2, n))
    assert is_float_value(layers[0])
    expected = numerical_grad(layers_loss, [layers, x])
    assert isinstance(expected[0], Layer) and expected[0].name == "dense"
    got = s2sad.grad(layers_loss)(layers, x)
    for g, e in zip(_leaves(got), _leaves(expected)):
        np.testing.assert_allclose(g, e, rtol=1e-6, atol=1e-8)
    # a hand-made difference of one entry
    h = 1e-6
    up = [Layer(layers[0].W.copy(), layers[0].b.copy()), layers[1]]
    down = [Layer(layers[0].W.copy(), layers[0].b.copy()), layers[1]]
    up[0].W[0, 1] += h
    down[0].W[0, 1] -= h
    fd = (layers_loss(up, x) - layers_loss(down, x)) / (2 * h)
    np.testing.assert_allclose(expected[0].W[0, 1], fd, rtol=1e-6)


@pytest.mark.parametrize("n", [3, 5])
def test_namedtuple(n):
    rng = np.random.default_rng(n)
    p, x = Pair(rng.standard_normal(n), 0.7), rng.standard_normal(n)
    expected = numerical_grad(pair_loss, [p, x])
    assert isinstance(expected, Pair)
    np.testing.assert_allclose(expected.a, x * 0.7, rtol=1e-6)
    np.testing.assert_allclose(expected.s, np.sum(p.a * x) + 1.4, rtol=1e-6)
    got = s2sad.grad(pair_loss)(p, x)
    np.testing.assert_allclose(got.a, expected.a, rtol=1e-6)
    np.testing.assert_allclose(got.s, expected.s, rtol=1e-6)
