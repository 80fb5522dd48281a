"""Properties of the objects a function is given (dataclasses, namedtuples,
plain classes), in both modes.

A property read as a field had nowhere to put its cotangent: the gradient of
the fields it is computed from was silently wrong (``layer.Wsq`` with ``Wsq =
W * W`` gave W's gradient without that term).  The read is now the getter's
call; other descriptors are refused at their line.  Forward mode reads a
field's tangent from the tangent object (it refused every field before).
"""

import functools
import operator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pytest

import s2sad
from s2sad import errors
from s2sad.testing import numerical_grad


@dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    eps = 1e-3  # a class attribute: a constant, no field

    @property
    def Wsq(self):
        return self.W * self.W

    @property
    def total(self):
        return np.sum(self.Wsq) + np.sum(self.b) * self.eps

    def shift(self, X):
        return X @ self.Wsq + self.b


class Pair(NamedTuple):
    W: np.ndarray
    b: np.ndarray

    @property
    def scaled(self):
        return np.tanh(self.W) * 2.0


class Plain:
    def __init__(self, W):
        self.W = W

    @property
    def norm2(self):
        return np.sum(self.W**2)


def uses_property(layer, X):
    return np.sum(np.tanh(X @ layer.Wsq + layer.b))


def nested_property(layer, X):
    return layer.total * np.sum(X) + np.sum(layer.shift(X))


def class_attribute(layer, X):
    return np.sum(X @ layer.W) * layer.eps + np.sum(layer.b)


def namedtuple_property(pair, X):
    return np.sum(X @ pair.scaled + pair.b)


def plain_property(obj, x):
    return obj.norm2 * np.sum(x)


def _fd(fn, make, leaves, X):
    """Central differences in each leaf of the object ``make(*leaves)``."""
    out = []
    for i in range(len(leaves)):

        def f(leaf, i=i):
            parts = list(leaves)
            parts[i] = leaf
            return fn(make(*parts), X)

        out.append(numerical_grad(f, (leaves[i],), 0))
    return out


CASES = [
    (uses_property, Layer),
    (nested_property, Layer),
    (class_attribute, Layer),
    (namedtuple_property, Pair),
]


@pytest.mark.parametrize("fn, make", CASES, ids=[c[0].__name__ for c in CASES])
@pytest.mark.parametrize("shape", [(3, 2), (4, 1)])
def test_gradient_and_tangent(fn, make, shape):
    rng = np.random.default_rng(sum(shape))
    W, b = rng.normal(size=shape), rng.normal(size=shape[1])
    X = rng.normal(size=(5, shape[0]))
    obj = make(W, b)
    want = _fd(fn, make, (W, b), X)
    vg = s2sad.value_and_grad(fn)
    for _ in range(3):  # the workspace's buffers on later calls
        value, g = vg(obj, X)
        assert value == pytest.approx(fn(obj, X), rel=1e-12)
        assert type(g) is make
        np.testing.assert_allclose(g.W, want[0], rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(g.b, want[1], rtol=1e-6, atol=1e-9)
    tW, tb = rng.normal(size=W.shape), rng.normal(size=b.shape)
    value, tangent = s2sad.jvp(fn)(obj, X, make(tW, tb))
    assert value == pytest.approx(fn(obj, X), rel=1e-12)
    assert tangent == pytest.approx(
        np.sum(want[0] * tW) + np.sum(want[1] * tb), rel=1e-6
    )


def test_property_of_a_plain_object_passed_in():
    rng = np.random.default_rng(3)
    obj, x = Plain(rng.normal(size=(3, 2))), rng.normal(size=4)
    g = s2sad.grad(plain_property, argnums=1)(obj, x)
    np.testing.assert_allclose(
        g, numerical_grad(plain_property, (obj, x), 1), rtol=1e-7
    )


@dataclass
class Cached:
    W: np.ndarray

    @functools.cached_property
    def Wsq(self):
        return self.W * self.W


@dataclass
class Foreign:
    W: np.ndarray
    first = property(operator.itemgetter(0))  # no Python source to read


def cached(obj, X):
    return np.sum(X @ obj.Wsq)


def foreign(obj, X):
    return np.sum(obj.first)


def through_dict(obj, X):  # the fields by key: as silently wrong as a property was
    return np.sum(X @ obj.__dict__["W"])


@pytest.mark.parametrize(
    "fn, make, what",
    [
        (cached, Cached, "cached property 'obj.Wsq'"),
        (foreign, Foreign, "property 'obj.first'"),
        (through_dict, Cached, "'obj.__dict__' reads the fields"),
    ],
)
def test_other_descriptors_refused_at_their_line(fn, make, what):
    obj, X = make(np.ones((3, 2))), np.ones((4, 3))
    with pytest.raises(errors.S2SADError) as info:
        s2sad.grad(fn)(obj, X)
    text = str(info.value)
    assert what in text and "test_properties.py:" in text, text


def flat_read(x):
    return np.sum(x.flat[::2] ** 2)


def data_read(x):
    y = x * 2.0
    return np.sum(np.asarray(y.base) ** 2) + np.sum(x)


def real_imag(x):
    y = np.tanh(x)
    return np.sum(y.real**2) + np.sum(np.real(x) * 3.0) + np.sum(y.imag + x.imag)


@dataclass
class Holder:
    data: np.ndarray  # a field named like an array attribute


def field_named_data(h, x):
    return np.sum(h.data * x)


@pytest.mark.parametrize("fn, what", [(flat_read, "x.flat"), (data_read, "y.base")])
def test_array_views_refused_in_both_modes(fn, what):
    """x.flat, x.base...: read as a pytree field, the cotangent was a dict
    where an array was due (a TypeError while the gradient ran)."""
    x = np.arange(6.0).reshape(2, 3)
    for run in (lambda: s2sad.grad(fn)(x), lambda: s2sad.jvp(fn)(x, np.ones_like(x))):
        with pytest.raises(errors.S2SADError) as info:
            run()
        assert f"'{what}' reads a differentiated array" in str(info.value)
        assert "test_properties.py:" in str(info.value)


def test_real_and_imag_of_real_values():
    x = np.random.default_rng(4).normal(size=(2, 3))
    g = s2sad.grad(real_imag)(x)
    np.testing.assert_allclose(g, numerical_grad(real_imag, (x,), 0), rtol=1e-7)
    t = np.ones_like(x)
    _, tangent = s2sad.jvp(real_imag)(x, t)
    assert tangent == pytest.approx(np.sum(g), rel=1e-9)


def test_a_field_named_like_an_array_attribute():
    rng = np.random.default_rng(6)
    h, x = Holder(rng.normal(size=3)), rng.normal(size=3)
    g = s2sad.grad(field_named_data)(h, x)
    np.testing.assert_allclose(g.data, x)
    _, tangent = s2sad.jvp(field_named_data)(h, x, Holder(np.ones(3)))
    assert tangent == pytest.approx(np.sum(x))
