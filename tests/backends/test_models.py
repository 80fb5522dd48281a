"""Whole models on torch, array-api-strict (both devices) and CuPy: the value
and the gradients of every parameter equal NumPy's in float64.

The MLPs and the RNN are the examples' own loss functions (examples/), with
their parameters in float64; logistic regression is written here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import s2sad
from s2sad.runtime import nn
from tests.backends.libraries import check_against_numpy, convert
from tests.corpus.fd import assert_close_tree, numerical_grad

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str):
    """examples/<name>.py as a module (its _common helper found beside it)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.append(str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(
        f"s2sad_example_{name}", EXAMPLES / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def logistic(w, b, X, y):
    """Mean logistic loss with an L2 penalty (labels 0/1)."""
    z = X @ w + b
    return np.mean(
        np.log(1.0 + np.exp(-np.abs(z))) + np.maximum(z, 0.0) - y * z
    ) + 0.01 * np.sum(w * w)


def _data(rng, n, d, classes):
    return rng.normal(size=(n, d)), rng.integers(0, classes, n)


def _params(rng, sizes):
    return {k: rng.normal(size=s) * 0.3 for k, s in sizes.items()}


def test_logistic_regression(lib):
    rng = np.random.default_rng(0)
    X, y = _data(rng, 20, 3, 2)
    args = [rng.normal(size=3), 0.1, X, y.astype(float)]
    g = s2sad.grad(logistic, argnums=(0, 1))(*args)
    assert_close_tree(g[0], numerical_grad(logistic, args, 0), where="w")
    check_against_numpy(lib, logistic, args, argnums=(0, 1))


@pytest.mark.parametrize("loss", ["loss_tanh", "loss_relu"])
def test_mlp_of_the_example(lib, loss):
    fn = getattr(_example("mlp_mnist"), loss)
    rng = np.random.default_rng(1)
    X, y = _data(rng, 12, 784, 10)
    params = _params(
        rng, {"W1": (784, 100), "b1": (100,), "W2": (100, 10), "b2": (10,)}
    )
    check_against_numpy(lib, fn, [params, X, y], rtol=1e-11)


def test_rnn_of_the_example(lib):
    rnn = _example("rnn_mnist")
    rng = np.random.default_rng(2)
    X, y = _data(rng, 8, 784, 10)
    params = _params(
        rng, {"Wx": (196, 64), "Wh": (64, 64), "bh": (64,), "Wo": (64, 10), "bo": (10,)}
    )
    check_against_numpy(lib, rnn.loss, [params, X, y], rtol=1e-11)


def small_rnn(params, x, y):
    h = np.zeros((x.shape[0], params["Wh"].shape[0]))
    for t in range(3):
        h = np.tanh(
            x[:, t * 2 : (t + 1) * 2] @ params["Wx"] + h @ params["Wh"] + params["bh"]
        )
    return nn.softmax_cross_entropy(h @ params["Wo"], y)


def test_small_rnn_reference_matches_finite_differences(lib):
    """A loop small enough for finite differences, then the library against it."""
    rng = np.random.default_rng(3)
    X, y = _data(rng, 5, 6, 3)
    params = _params(rng, {"Wx": (2, 4), "Wh": (4, 4), "bh": (4,), "Wo": (4, 3)})
    g = s2sad.grad(small_rnn)(params, X, y)
    assert_close_tree(g, numerical_grad(small_rnn, [params, X, y], 0), where="rnn")
    check_against_numpy(lib, small_rnn, [params, X, y])


def test_training_steps_stay_in_the_library(lib):
    """Gradient steps with the library's own arithmetic give NumPy's parameters."""
    rng = np.random.default_rng(4)
    X, y = _data(rng, 30, 3, 2)
    w_np, w = rng.normal(size=3), None
    w = lib.to(w_np)
    Xl, yl = convert([X, y.astype(float)], lib)
    grad = s2sad.grad(logistic)
    for _ in range(5):
        w_np = w_np - 0.5 * grad(w_np, 0.0, X, y.astype(float))
        w = w - 0.5 * grad(w, 0.0, Xl, yl)
    np.testing.assert_allclose(lib.back(w), w_np, rtol=1e-12)
