"""Array libraries s2sad has not verified are refused, never run silently.

Gradients over torch tensors or Array API arrays (array-api-strict, also on its
second device, the GPU stand-in) are not checked against NumPy yet, so a call
that passes one, as a differentiated argument or as data, raises a
NonDifferentiableArgumentError that names the argument and the verified
libraries (NumPy, and Dask with NumPy parameters: tests/test_dask.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import s2sad
from s2sad.errors import NonDifferentiableArgumentError


def loss(w, X):
    return np.sum(np.tanh(X @ w))


def _torch(shape):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    return torch.ones(shape, dtype=torch.float64)


def _strict(shape, device=None):
    xp = pytest.importorskip(
        "array_api_strict", reason="array-api-strict is not installed"
    )
    if device == "second":  # not the CPU device: the stand-in for a GPU
        names = {str(d): d for d in xp.__array_namespace_info__().devices()}
        device = names.get("array_api_strict.Device('device1')")
        if device is None:
            pytest.skip("this array-api-strict has no 'device1'")
    return xp.ones(shape, dtype=xp.float64, device=device)


MAKERS = {
    "torch": _torch,
    "array_api_strict": _strict,
    "array_api_strict_device": lambda shape: _strict(shape, "second"),
}


@pytest.mark.parametrize("library", sorted(MAKERS))
def test_foreign_data_is_refused_naming_the_argument(library):
    X = MAKERS[library]((3, 2))
    with pytest.raises(NonDifferentiableArgumentError) as info:
        s2sad.grad(loss)(np.ones(2), X)
    message = str(info.value)
    assert "argument 1" in message and type(X).__qualname__ in message
    assert "dask" in message and "not verified" in message


@pytest.mark.parametrize("library", sorted(MAKERS))
def test_foreign_parameter_is_refused_naming_it(library):
    w = MAKERS[library]((2,))
    with pytest.raises(
        NonDifferentiableArgumentError, match=r"argument 'w' \(argnums=0\)"
    ):
        s2sad.grad(loss)(w, np.ones((3, 2)))


def test_numpy_arguments_still_differentiate():
    """The refusal does not touch NumPy calls: the gradient is checked exactly."""
    w, X = np.array([0.3, -0.2]), np.arange(6.0).reshape(3, 2) / 6
    want = X.T @ (1 - np.tanh(X @ w) ** 2)
    np.testing.assert_allclose(s2sad.grad(loss)(w, X), want, rtol=1e-12)
