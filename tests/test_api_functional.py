"""vjp, JAX's jvp form, jacfwd/jacrev/hessian over pytrees, pytree arguments
(namedtuples, dataclasses, registered classes, None leaves) and check_grads
(issue 15).  Values are checked against central differences or exact formulas."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import s2sad
from s2sad.errors import GradientCheckError, NonDifferentiableArgumentError
from s2sad.testing import numerical_grad

rng = np.random.default_rng(1)
X = rng.standard_normal(3)
W = rng.standard_normal((2, 3))


def layer(x, W):
    return np.tanh(W @ x)


def jac_layer(x, W):
    """d tanh(W x) / dx and / dW, exactly."""
    d = 1 - np.tanh(W @ x) ** 2
    jx = d[:, None] * W
    jW = np.einsum("i,ij,k->ijk", d, np.eye(2), x)
    return jx, jW


# ---------------------------------------------------------------- 2. vjp, jvp


def test_vjp_of_an_array_output():
    out, pullback = s2sad.vjp(layer, X, W)
    np.testing.assert_allclose(out, layer(X, W))
    u = rng.standard_normal(2)
    gx, gW = pullback(u)
    jx, jW = jac_layer(X, W)
    np.testing.assert_allclose(gx, jx.T @ u, atol=1e-12)
    np.testing.assert_allclose(gW, np.einsum("i,ijk->jk", u, jW), atol=1e-12)


def test_vjp_of_a_scalar_with_aux():
    def f(x):
        return np.sum(x**3), {"sq": x * x}

    out, pullback, aux = s2sad.vjp(f, X, has_aux=True)
    assert out == pytest.approx(np.sum(X**3))
    np.testing.assert_allclose(aux["sq"], X * X)
    (g,) = pullback(2.0)
    np.testing.assert_allclose(g, 6 * X * X)


def test_vjp_refuses_a_cotangent_of_the_wrong_shape():
    _, pullback = s2sad.vjp(layer, X, W)
    with pytest.raises(ValueError, match="shape"):
        pullback(np.ones(3))


def test_jvp_in_jax_form_and_the_transform_form_agree():
    tx, tW = rng.standard_normal(3), rng.standard_normal((2, 3))
    out, t_out = s2sad.jvp(layer, (X, W), (tx, tW))
    jx, jW = jac_layer(X, W)
    np.testing.assert_allclose(out, layer(X, W))
    np.testing.assert_allclose(t_out, jx @ tx + np.einsum("ijk,jk->i", jW, tW))
    value, t = s2sad.jvp(layer)(X, W, tx)  # the transform form still works
    np.testing.assert_allclose(t, jx @ tx)
    _, t_aux, aux = s2sad.jvp(lambda x: (np.sum(x * x), x), (X,), (tx,), has_aux=True)
    assert t_aux == pytest.approx(2 * X @ tx)
    np.testing.assert_allclose(aux, X)


def test_jvp_needs_one_tangent_per_primal():
    with pytest.raises(ValueError, match="one tangent per primal"):
        s2sad.jvp(layer, (X, W), (X,))


# ---------------------------------------------------------------- 2. Jacobians of pytrees


def tree_fn(p):
    h = np.tanh(p["W"] @ p["x"])
    return {"h": h, "s": np.sum(h)}


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobians_of_pytrees_have_jax_layout(jac):
    p = {"W": W, "x": X}
    J = getattr(s2sad, jac)(tree_fn)(p)
    jx, jW = jac_layer(X, W)
    assert J["h"]["W"].shape == (2, 2, 3) and J["s"]["x"].shape == (3,)
    np.testing.assert_allclose(J["h"]["x"], jx, atol=1e-12)
    np.testing.assert_allclose(J["h"]["W"], jW, atol=1e-12)
    np.testing.assert_allclose(J["s"]["x"], jx.sum(0), atol=1e-12)


def test_jacrev_with_argnums_list_gives_tuples():
    jx, jW = s2sad.jacrev(layer, argnums=[0, 1])(X, W)
    want = jac_layer(X, W)
    np.testing.assert_allclose(jx, want[0], atol=1e-12)
    np.testing.assert_allclose(jW, want[1], atol=1e-12)


def test_hessian_of_a_dict_argument():
    def f(p):
        return np.sum(p["a"] ** 2 * p["b"][0]) + p["b"][1] ** 3

    p = {"a": X, "b": [1.5, 0.5]}
    H = s2sad.hessian(f)(p)
    np.testing.assert_allclose(H["a"]["a"], 2 * 1.5 * np.eye(3), atol=1e-12)
    np.testing.assert_allclose(H["a"]["b"][0], 2 * X, atol=1e-12)
    assert H["b"][1]["b"][1] == pytest.approx(6 * 0.5)
    assert H["b"][0]["b"][0] == pytest.approx(0.0, abs=1e-12)


# ---------------------------------------------------------------- 4. pytree arguments


class Params(NamedTuple):
    W: np.ndarray
    b: np.ndarray


@dataclasses.dataclass
class DParams:
    W: np.ndarray
    b: np.ndarray
    name: str = "layer"


class Registered:
    def __init__(self, W, b, act="tanh"):
        self.W, self.b, self.act = W, b, act


s2sad.register_pytree(
    Registered,
    lambda r: ([r.W, r.b], r.act),
    lambda act, kids: Registered(*kids, act=act),
)


def attr_loss(p, x):
    return np.sum(np.tanh(p.W @ x + p.b) ** 2)


def flat_loss(W, b, x):
    return np.sum(np.tanh(W @ x + b) ** 2)


@pytest.mark.parametrize("kind", [Params, DParams, Registered])
def test_object_pytrees_get_gradients_of_their_type(kind):
    b = rng.standard_normal(2)
    g = s2sad.grad(attr_loss)(kind(W, b), X)
    assert type(g) is kind
    gW, gb = numerical_grad(flat_loss, (W, b, X), (0, 1))
    np.testing.assert_allclose(g.W, gW, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g.b, gb, rtol=1e-6, atol=1e-8)
    if kind is not Params:  # the static part travels along
        assert (g.name if kind is DParams else g.act) in ("layer", "tanh")


def test_namedtuple_unpacked_in_the_function():
    def f(p, x):
        W, b = p
        return np.sum((W @ x + b) ** 2)

    b = rng.standard_normal(2)
    g = s2sad.grad(f)(Params(W, b), X)
    assert isinstance(g, Params)
    np.testing.assert_allclose(g.b, 2 * (W @ X + b))


def test_none_leaves_are_empty_subtrees():
    def f(p, x):
        return np.sum(p["W"] @ x)

    g = s2sad.grad(f)({"W": W, "unused": None}, X)
    assert g["unused"] is None
    np.testing.assert_allclose(g["W"], np.tile(X, (2, 1)))


def test_a_non_float_leaf_is_named_by_its_path():
    with pytest.raises(NonDifferentiableArgumentError, match=r"'params'\['act'\]"):
        s2sad.grad(lambda params: np.sum(params["W"]))({"W": W, "act": 1})
    with pytest.raises(NonDifferentiableArgumentError, match=r"'p'\.b "):
        s2sad.grad(attr_loss)(DParams(W, 1), X)  # b=1 is an int


# ---------------------------------------------------------------- 5. check_grads


def test_check_grads_passes_on_correct_derivatives():
    s2sad.check_grads(layer, (X, W))
    s2sad.check_grads(
        lambda p, x: np.sum(np.tanh(p["W"] @ x) ** 2), ({"W": W}, X), order=2
    )
    s2sad.check_grads(lambda x, n: np.sum(x**n), (X, 3), modes=("rev",))


@pytest.fixture
def private_rules(monkeypatch):
    """Rules registered by the test vanish after it (other tests count the registry)."""
    from s2sad.runtime import registry, tangents

    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))
    monkeypatch.setattr(registry, "_USER_ENTRIES", list(registry._USER_ENTRIES))
    monkeypatch.setattr(registry, "_FINGERPRINT", [])
    monkeypatch.setattr(tangents, "_TANGENTS", dict(tangents._TANGENTS))
    monkeypatch.setattr(tangents, "_ELEMENTWISE", set(tangents._ELEMENTWISE))


def test_check_grads_catches_a_wrong_custom_rule(private_rules):
    def cube(x):
        return x**3

    @s2sad.adjoint(cube)
    def d_cube(g, ans, x):
        return (g * 2 * x**2,)  # wrong: 3 x^2

    def loss(x):
        return np.sum(cube(x))

    with pytest.raises(GradientCheckError, match=r"argument 'x' \(#0\), mode 'rev'"):
        s2sad.check_grads(loss, (X,))


def test_check_grads_dot_product_test_catches_a_wrong_tangent_rule(private_rules):
    from s2sad.runtime.tangents import tangent

    def quad(x):
        return x * x

    @s2sad.adjoint(quad)
    def d_quad(g, ans, x):
        return (2 * g * x,)

    @tangent(quad, argnum=0)
    def jvp_quad(t, ans, x):
        return 3 * t * x  # wrong: 2 t x

    with pytest.raises(GradientCheckError) as err:
        s2sad.check_grads(lambda x: np.sum(quad(x)), (X,))
    assert "mode 'fwd'" in str(err.value) or "dot-product" in str(err.value)
