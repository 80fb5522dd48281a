"""JAX's conventions in s2sad's API (issue 15): argnums sequences, has_aux,
partials, bound methods and builtins, reprs and type markers.  Every gradient is
checked against central finite differences in float64 or exact values."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad.errors import NonScalarOutputError, SourceUnavailableError
from s2sad.testing import numerical_grad

REPO = Path(__file__).resolve().parents[1]
rng = np.random.default_rng(0)
X = rng.standard_normal(4)
Y = rng.standard_normal(4)


def loss_aux(x, y):
    h = np.tanh(x * y)
    return np.sum(h * h), {"mean": np.mean(h), "h": h}


def loss_value(x, y):
    return loss_aux(x, y)[0]


def pair(x, y):
    return np.sum(x * y), np.sum(x)


def plain(x, y):
    return np.sum(np.sin(x) * y)


# ---------------------------------------------------------------- 1. argnums, has_aux


@pytest.mark.parametrize("argnums", [[0, 1], (0, 1), np.array([0, 1])])
def test_argnums_sequences_act_as_tuples(argnums):
    g = s2sad.grad(plain, argnums=list(argnums))(X, Y)
    assert isinstance(g, tuple) and len(g) == 2
    want = numerical_grad(plain, (X, Y), (0, 1))
    for a, b in zip(g, want):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)


def test_argnums_list_of_one_gives_a_tuple():
    g = s2sad.grad(plain, argnums=[1])(X, Y)
    assert isinstance(g, tuple) and len(g) == 1
    np.testing.assert_allclose(g[0], np.sin(X))


@pytest.mark.parametrize("bad", ["0", 1.0, [0, "1"], True])
def test_argnums_of_the_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="argnums"):
        s2sad.grad(plain, argnums=bad)


def test_grad_has_aux_returns_gradient_and_aux():
    g, aux = s2sad.grad(loss_aux, has_aux=True)(X, Y)
    np.testing.assert_allclose(g, numerical_grad(loss_value, (X, Y), 0), rtol=1e-6)
    h = np.tanh(X * Y)
    np.testing.assert_allclose(aux["h"], h)
    assert aux["mean"] == pytest.approx(np.mean(h))


def test_value_and_grad_has_aux_with_argnums_list():
    (value, aux), (gx, gy) = s2sad.value_and_grad(
        loss_aux, argnums=[0, 1], has_aux=True
    )(X, Y)
    assert value == pytest.approx(loss_value(X, Y))
    assert set(aux) == {"mean", "h"}
    want = numerical_grad(loss_value, (X, Y), (0, 1))
    np.testing.assert_allclose(gx, want[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(gy, want[1], rtol=1e-6, atol=1e-8)


def test_has_aux_with_buffers_copies_aux_out_of_the_workspace():
    def big(x):
        t = np.tanh(x)
        return np.sum(t * t), t

    x = rng.standard_normal(40_000)
    vg = s2sad.value_and_grad(big, has_aux=True)
    results = [vg(x) for _ in range(3)]  # the third call runs with a workspace
    for (value, aux), g in results:
        np.testing.assert_allclose(aux, np.tanh(x))
        np.testing.assert_allclose(g, 2 * np.tanh(x) * (1 - np.tanh(x) ** 2))
    assert results[1][0][1] is not results[2][0][1]


def test_a_tuple_output_without_has_aux_suggests_it():
    with pytest.raises(NonScalarOutputError, match="has_aux=True"):
        s2sad.grad(pair)(X, Y)


def test_has_aux_without_a_pair_is_a_clear_error():
    with pytest.raises(
        NonScalarOutputError, match=r"must return a pair \(value, aux\)"
    ):
        s2sad.grad(plain, has_aux=True)(X, Y)


# ---------------------------------------------------------------- 3. callables


def test_partial_of_a_function():
    p = functools.partial(plain, y=Y)
    np.testing.assert_allclose(s2sad.grad(p)(X), np.cos(X) * Y)
    q = functools.partial(plain, X)  # argnums counts the partial's parameters
    np.testing.assert_allclose(s2sad.grad(q)(Y), np.sin(X))
    assert "functools.partial" in repr(s2sad.grad(p))


class Model:
    def __init__(self, scale):
        self.scale = scale

    def loss(self, x, y):
        return np.sum((x * y) ** 2) * self.scale


def test_bound_method():
    m = Model(3.0)
    g = s2sad.grad(m.loss, argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(g[0], 6.0 * X * Y * Y)
    np.testing.assert_allclose(g[1], 6.0 * X * X * Y)


def test_lambda():
    assert s2sad.grad(lambda x: x**3)(2.0) == pytest.approx(12.0)


@pytest.mark.parametrize(
    "fun, x, want",
    [
        (np.sin, 1.0, math.cos(1.0)),
        (math.sin, 1.0, math.cos(1.0)),
        (np.exp, 0.5, math.exp(0.5)),
        (abs, -2.0, -1.0),
        (math.sqrt, 4.0, 0.25),
    ],
)
def test_ufuncs_builtins_and_math_go_through_their_rules(fun, x, want):
    assert s2sad.grad(fun)(x) == pytest.approx(want, rel=1e-12)
    value, g = s2sad.value_and_grad(fun)(x)
    assert value == fun(x) and g == pytest.approx(want, rel=1e-12)


def test_two_argument_ufunc():
    g = s2sad.grad(np.hypot, argnums=(0, 1))(3.0, 4.0)
    assert g == pytest.approx((0.6, 0.8))


def test_a_ufunc_without_rule_is_a_clear_error():
    with pytest.raises(SourceUnavailableError, match="no registered rule"):
        s2sad.grad(np.nextafter)


def test_a_ufunc_with_an_array_output_is_refused():
    with pytest.raises(NonScalarOutputError):
        s2sad.grad(np.sin)(X)


# ---------------------------------------------------------------- 6. names and types


def test_help_and_repr_name_the_function():
    assert s2sad.grad.__name__ == "grad" and "Gradient" in s2sad.grad.__doc__
    g = s2sad.grad(plain, argnums=[0, 1])
    assert repr(g) == "<s2sad.grad of plain, argnums=(0, 1)>"
    assert repr(s2sad.value_and_grad(loss_aux, has_aux=True)) == (
        "<s2sad.value_and_grad of loss_aux, argnums=0, has_aux=True>"
    )
    assert g.__name__ == "plain"


def test_py_typed_marker_is_package_data():
    assert (REPO / "s2sad" / "py.typed").exists()
    text = (REPO / "pyproject.toml").read_text()
    assert '[tool.setuptools.package-data]\ns2sad = ["py.typed"]' in text
