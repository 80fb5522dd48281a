"""A dataclass field with ``init=False`` (set in ``__post_init__``) of a
differentiated argument is no leaf of its pytree: read as a field, its
cotangent and tangent were dropped and the init fields it is computed from
missed their share, silently (``p.Wsq`` with ``Wsq = W * W``: zero gradient).
Such a read is refused at its line in both modes; init fields, class
attributes and init=False fields holding no floats still differentiate.
"""

from dataclasses import dataclass, field

import numpy as np
import pytest

import s2sad
from s2sad import errors
from s2sad.testing import numerical_grad


@dataclass
class Squared:
    W: np.ndarray
    Wsq: np.ndarray = field(init=False)
    rows: int = field(init=False)

    def __post_init__(self):
        self.Wsq = self.W * self.W
        self.rows = self.W.shape[0]

    def through_self(self, x):
        return np.sum(x @ self.Wsq)

    def plain(self, x):
        return np.sum(np.tanh(x @ self.W)) * self.rows


def direct(p, x):
    return np.sum(x @ p.Wsq) + np.sum(p.W)


def via_method(p, x):
    return p.through_self(x)


def fields_only(p, x):
    return p.plain(x) + p.rows * np.sum(p.W**2)


def constant_object(W, p):
    # p is not differentiated: its derived field is a constant
    return np.sum(np.sin(W @ p.Wsq))


@pytest.mark.parametrize("f", [direct, via_method])
@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_derived_field_refused(f, mode):
    p, x = Squared(np.ones((2, 3))), np.ones((4, 2))
    with pytest.raises(errors.UnsupportedSyntaxError, match="init=False") as info:
        if mode == "grad":
            s2sad.grad(f)(p, x)
        else:
            s2sad.jvp(f)(p, x, Squared(np.ones((2, 3))))
    assert "test_derived_fields.py" in str(info.value)
    assert "@property" in str(info.value)


@pytest.mark.parametrize("shape", [(2, 3), (3, 3), (1, 4)])
def test_init_fields_still_differentiate(shape):
    rng = np.random.default_rng(shape[1])
    W, x = rng.standard_normal(shape), rng.standard_normal((2, shape[0]))
    got = s2sad.grad(fields_only)(Squared(W), x).W
    expected = numerical_grad(lambda W: fields_only(Squared(W), x), [W])
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8)
    _, tangent = s2sad.jvp(fields_only)(Squared(W), x, Squared(np.ones(shape)))
    h = 1e-6
    fd = (fields_only(Squared(W + h), x) - fields_only(Squared(W - h), x)) / (2 * h)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6)


@pytest.mark.parametrize("shape", [(3, 3), (2, 2)])
def test_constant_object_reads_derived_field(shape):
    rng = np.random.default_rng(1)
    W, p = rng.standard_normal(shape), Squared(rng.standard_normal(shape))
    np.testing.assert_allclose(
        s2sad.grad(constant_object)(W, p),
        numerical_grad(constant_object, [W, p], 0),
        rtol=1e-6,
        atol=1e-8,
    )
