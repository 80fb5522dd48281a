"""What the Array API path does not verify is refused, never run differently.

A NumPy function or a rule outside the allow-list, arrays of two libraries or
of two devices in one call, integer parameters, vjp and second order: each raises an
s2sad error that says what and where (and what to do instead).
"""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.errors import ForeignArrayError, NonDifferentiableArgumentError


def uses_inverse(A):
    return np.sum(np.linalg.inv(A))


def uses_cumsum(x):
    return np.sum(np.cumsum(x) ** 2)


def loss(w, X):
    return np.sum(np.tanh(X @ w))


@pytest.mark.parametrize(
    "fn, name", [(uses_inverse, "numpy.linalg.inv"), (uses_cumsum, "numpy.cumsum")]
)
def test_unverified_numpy_function_is_refused_naming_it_and_the_line(lib, fn, name):
    A = lib.to(np.eye(3) * 2.0)
    with pytest.raises(ForeignArrayError) as info:
        s2sad.grad(fn)(A)
    message = str(info.value)
    assert name in message and "not verified on" in message
    assert f"{__file__}:{fn.__code__.co_firstlineno + 1}" in message


def test_unverified_rule_is_refused():
    """torch runs x.prod() itself; s2sad has no verified rule for its gradient."""
    torch = pytest.importorskip("torch", reason="torch is not installed")

    def product(x):
        return x.prod()

    with pytest.raises(ForeignArrayError, match=r"d_prod.*not verified on torch"):
        s2sad.grad(product)(torch.ones(3, dtype=torch.float64))


def test_strided_slice_is_refused(lib):
    def every_other(x):
        return np.sum(x[::2] ** 2)

    with pytest.raises(ForeignArrayError, match="indexing by"):
        s2sad.grad(every_other)(lib.to(np.arange(6.0)))


def test_numpy_data_with_library_parameter_is_refused(lib):
    with pytest.raises(ForeignArrayError, match="mixes .* with a numpy.ndarray"):
        s2sad.grad(loss)(lib.to(np.ones(2)), np.ones((3, 2)))
    with pytest.raises(ForeignArrayError, match="mixes"):
        s2sad.grad(loss)(np.ones(2), lib.to(np.ones((3, 2))))


def test_two_libraries_are_refused():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    xp = pytest.importorskip(
        "array_api_strict", reason="array-api-strict is not installed"
    )
    with pytest.raises(ForeignArrayError, match="mixes torch arrays"):
        s2sad.grad(loss)(torch.ones(2, dtype=torch.float64), xp.ones((3, 2)))


def test_two_devices_are_refused():
    xp = pytest.importorskip(
        "array_api_strict", reason="array-api-strict is not installed"
    )
    w = xp.ones(2)
    X = xp.ones((3, 2), device=xp.Device("device1"))
    with pytest.raises(ForeignArrayError, match="on devices .*one device"):
        s2sad.grad(loss)(w, X)


def test_integer_parameter_is_refused(lib):
    w = lib.to(np.ones(2, dtype=np.int64))
    with pytest.raises(
        NonDifferentiableArgumentError, match=r"argument 'w' \(argnums=0\).*real float"
    ):
        s2sad.grad(loss)(w, lib.to(np.ones((3, 2))))


def tanh_sum(v):
    return np.sum(np.tanh(v))


def test_vjp_and_second_order_are_refused(lib):
    """jvp runs on the library (tests/backends/test_forward.py); vjp, hvp,
    hessian and forward over reverse are not verified there: refused."""
    x = lib.to(np.ones(2))
    for call in (
        lambda: s2sad.vjp(tanh_sum, x),
        lambda: s2sad.hessian(tanh_sum)(x),
        lambda: s2sad.hvp(tanh_sum)(x, x),
        lambda: s2sad.jvp(s2sad.grad(tanh_sum))(x, x),
        lambda: s2sad.jvp(s2sad.jvp(tanh_sum))(x, x, x),
    ):
        with pytest.raises(NonDifferentiableArgumentError, match="hvp, vjp"):
            call()


def test_unverified_library_is_refused_naming_the_argument():
    """JAX arrays speak the Array API too, but s2sad has not checked them."""
    jnp = pytest.importorskip("jax.numpy", reason="jax is not installed")
    with pytest.raises(NonDifferentiableArgumentError) as info:
        s2sad.grad(loss)(np.ones(2), jnp.ones((3, 2)))
    message = str(info.value)
    assert "argument 1" in message and "not verified" in message and "torch" in message


def test_numpy_arguments_still_take_numpy_code(monkeypatch):
    """NumPy calls never reach the Array API path (its entry would raise)."""
    from s2sad.runtime import arrayapi

    def never(*args, **kwargs):
        raise AssertionError("a NumPy call took the Array API path")

    monkeypatch.setattr(arrayapi, "run", never)
    w, X = np.array([0.3, -0.2]), np.arange(6.0).reshape(3, 2) / 6
    want = X.T @ (1 - np.tanh(X @ w) ** 2)
    np.testing.assert_allclose(s2sad.grad(loss)(w, X), want, rtol=1e-12)
